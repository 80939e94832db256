import { Effect, type Scope } from "effect"
import * as FsSync from "node:fs"
import * as Os from "node:os"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"

/** Where a browser's memory and task limits are enforced. */
export type Mechanism = "cgroup-v2" | "cgroup-v1" | "rlimit"

export interface Limits {
  readonly memoryBytes: number
  readonly tasks: number
}

/** One browser's cgroup (one dir per hierarchy on v1). */
export interface Group {
  /** The `cgroup.procs` files a process writes its pid to, to join. */
  readonly procsFiles: ReadonlyArray<string>
  /** Kills every process still in it and removes it. */
  readonly destroy: Effect.Effect<void>
}

export interface Cgroups {
  readonly mechanism: "cgroup-v2" | "cgroup-v1"
  readonly create: (name: string, limits: Limits) => Effect.Effect<Group, unknown>
}

const ROOT = "/sys/fs/cgroup"

interface Hierarchy {
  /** Our dir in it, holding the browsers' groups. */
  readonly base: string
  /** Limit file name -> what to write, from the limits. */
  readonly files: (limits: Limits) => ReadonlyArray<readonly [string, string]>
  /** Only counts (v1's cpuacct): left out where it is not writable, limits still hold. */
  readonly optional?: boolean
}

/** Lines of `/proc/self/cgroup`: `id:controllers:path`. */
const ownCgroups = () =>
  FsSync.readFileSync("/proc/self/cgroup", "utf8")
    .trim()
    .split("\n")
    .map((line) => {
      const [, controllers = "", ...rest] = line.split(":")
      return { controllers: controllers.split(","), field: controllers, path: rest.join(":") }
    })

// A cgroup's files live in the kernel's memory: reading or writing one, or making or removing a
// group, takes microseconds, where a trip through the thread pool and a promise cost the service
// tens of them (several per launch and teardown). So they are made in place, synchronously.

const pidsIn = (dir: string): Array<number> => {
  let text = ""
  try {
    text = FsSync.readFileSync(Path.join(dir, "cgroup.procs"), "utf8")
  } catch {
    // gone already
  }
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map(Number)
}

/**
 * Whether `pid` is still running or exiting: neither gone nor a zombie waiting to be reaped (a
 * zombie leader whose other threads are still exiting counts as exiting).
 */
const exiting = (pid: number) => {
  try {
    const status = FsSync.readFileSync(`/proc/${pid}/status`, "utf8")
    const state = /^State:\s+(\S)/m.exec(status)?.[1]
    const threads = Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? "1")
    return state !== "Z" || threads > 1
  } catch {
    return false
  }
}

/**
 * A killed browser runs at the browsers' low priority: on a busy host its exit (freeing its
 * memory) could wait seconds for the CPU. Once it is dying nothing of the page runs, so it exits
 * at the service's own priority. Linux keeps a niceness per thread, and whichever thread exits
 * last frees the memory: each of them is raised.
 */
const hasten = (pid: number) => {
  const priority = Os.getPriority()
  let threads: Array<string>
  try {
    threads = FsSync.readdirSync(`/proc/${pid}/task`)
  } catch {
    return // gone already
  }
  for (const tid of threads) {
    try {
      Os.setPriority(Number(tid), priority)
    } catch {
      // gone already, or not ours to change
    }
  }
}

/**
 * SIGKILLs everything in `dir` until it is empty (or ten seconds pass: a
 * process in an uninterruptible wait, on a busy disk, dies only when the wait
 * ends), waits for the killed to finish exiting (neither gone nor a zombie
 * yet; ten seconds again at most), then removes it.
 */
const empty = async (dirs: ReadonlyArray<string>) => {
  const killed = new Set<number>()
  for (let attempt = 0; attempt < 500; attempt++) {
    const pids = dirs.flatMap(pidsIn)
    if (pids.length === 0) break
    for (const pid of pids) {
      killed.add(pid)
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // gone already
      }
      hasten(pid)
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  // A process leaves `cgroup.procs` once all its threads are dying, before it has freed its
  // memory: its uid and its memory are free only when it has exited (as long again at most).
  for (let attempt = 0; attempt < 500; attempt++) {
    for (const pid of killed) if (!exiting(pid)) killed.delete(pid)
    if (killed.size === 0) break
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  for (const dir of dirs) {
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        FsSync.rmdirSync(dir)
        break
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") break
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    }
  }
}

const hierarchies = (
  tag: string
): { mechanism: "cgroup-v2" | "cgroup-v1"; list: Array<Hierarchy> } | undefined => {
  let lines: ReturnType<typeof ownCgroups>
  try {
    lines = ownCgroups()
  } catch {
    return undefined
  }
  if (FsSync.existsSync(Path.join(ROOT, "cgroup.controllers"))) {
    const own = lines.find((line) => line.field === "")
    if (own === undefined) return undefined
    return {
      mechanism: "cgroup-v2",
      list: [
        {
          base: Path.join(ROOT, own.path, `rbs-${tag}`),
          files: (limits) => [
            ["memory.max", String(limits.memoryBytes)],
            ["memory.swap.max", "0"],
            ["pids.max", String(limits.tasks)]
          ]
        }
      ]
    }
  }
  const memory = lines.find((line) => line.controllers.includes("memory"))
  if (memory === undefined || !FsSync.existsSync(Path.join(ROOT, memory.field))) return undefined
  const list: Array<Hierarchy> = [
    {
      base: Path.join(ROOT, memory.field, memory.path, `rbs-${tag}`),
      files: (limits) => [["memory.limit_in_bytes", String(limits.memoryBytes)]]
    }
  ]
  const pids = lines.find((line) => line.controllers.includes("pids"))
  if (pids !== undefined && FsSync.existsSync(Path.join(ROOT, pids.field))) {
    list.push({
      base: Path.join(ROOT, pids.field, pids.path, `rbs-${tag}`),
      files: (limits) => [["pids.max", String(limits.tasks)]]
    })
  }
  // A browser's CPU, counted by the kernel (v2 counts it in every group: cpu.stat).
  const cpuacct = lines.find((line) => line.controllers.includes("cpuacct"))
  if (cpuacct !== undefined && FsSync.existsSync(Path.join(ROOT, cpuacct.field))) {
    list.push({
      base: Path.join(ROOT, cpuacct.field, cpuacct.path, `rbs-${tag}`),
      files: () => [],
      optional: true
    })
  }
  return { mechanism: "cgroup-v1", list }
}

/** Where the groups of a service of `tag` go, one dir a hierarchy (they may not exist). */
export const basesOf = (tag: string): ReadonlyArray<string> =>
  hierarchies(tag)?.list.map((hierarchy) => hierarchy.base) ?? []

/**
 * Removes what a service of `tag` that died left of its groups (`rbs cleanup`;
 * a start on the same data dir does it in `open`): any process still in one
 * killed, each browser's group and the service's own removed. Returns how many
 * browser groups there were.
 */
export const removeLeftovers = async (tag: string): Promise<number> => {
  let groups = 0
  for (const base of basesOf(tag)) {
    const entries = await Fs.readdir(base, { withFileTypes: true }).catch(() => [])
    const dirs = entries.filter((entry) => entry.isDirectory()).map((entry) => Path.join(base, entry.name))
    groups = Math.max(groups, dirs.length)
    await empty(dirs)
    await Fs.rmdir(base).catch(() => undefined)
  }
  return groups
}

/** On v2, the controllers our dir's children need, enabled in our dir and every one between. */
const enableV2Controllers = async (base: string) => {
  const parent = Path.dirname(base)
  const wanted = ["memory", "pids"]
  const enabled = (await Fs.readFile(Path.join(parent, "cgroup.subtree_control"), "utf8")).split(/\s+/)
  const missing = wanted.filter((name) => !enabled.includes(name))
  // Refused (EBUSY) when our own cgroup holds processes: then there is no cgroup for us.
  if (missing.length > 0)
    await Fs.writeFile(Path.join(parent, "cgroup.subtree_control"), missing.map((n) => `+${n}`).join(" "))
  await Fs.mkdir(base, { recursive: true })
  await Fs.writeFile(Path.join(base, "cgroup.subtree_control"), wanted.map((n) => `+${n}`).join(" "))
}

/**
 * A cgroup of our own below the service's (v2, or v1's memory and pids
 * hierarchies) to hold each browser in a group with limits; `undefined` when
 * none is writable here (no delegation, a read-only mount), and the caller
 * falls back to rlimits. Groups a crashed run left are emptied and removed.
 */
export const open = (tag: string): Effect.Effect<Cgroups | undefined, never, Scope.Scope> =>
  Effect.gen(function* () {
    const found = hierarchies(tag)
    if (found === undefined) return undefined
    const usable = yield* Effect.promise(async () => {
      try {
        if (found.mechanism === "cgroup-v2") await enableV2Controllers(found.list[0]!.base)
        for (const hierarchy of [...found.list]) {
          await Fs.mkdir(hierarchy.base, { recursive: true }).catch((error) => {
            if (!hierarchy.optional) throw error
            found.list.splice(found.list.indexOf(hierarchy), 1)
          })
        }
        // Leftovers of a run that died: their browsers are orphans.
        for (const hierarchy of found.list) {
          const entries = await Fs.readdir(hierarchy.base, { withFileTypes: true })
          const groups = entries
            .filter((entry) => entry.isDirectory())
            .map((e) => Path.join(hierarchy.base, e.name))
          await empty(groups)
        }
        // A probe group with a limit proves we may create and limit groups here.
        const probe = found.list.map((hierarchy) => Path.join(hierarchy.base, "probe"))
        for (const [index, hierarchy] of found.list.entries()) {
          await Fs.mkdir(probe[index]!, { recursive: true })
          for (const [file, value] of hierarchy.files({ memoryBytes: 256 * 1024 * 1024, tasks: 64 })) {
            await Fs.writeFile(Path.join(probe[index]!, file), value)
          }
        }
        await empty(probe)
        return true
      } catch {
        return false
      }
    })
    if (!usable) return undefined
    yield* Effect.addFinalizer(() =>
      Effect.forEach(
        found.list,
        (hierarchy) =>
          Effect.tryPromise(() => Fs.rmdir(hierarchy.base)).pipe(
            // A group its browser's teardown could not empty keeps ours: the next start empties both.
            Effect.catch((error) =>
              Effect.logDebug("browser.cgroup_kept", { path: hierarchy.base, reason: String(error.cause) })
            )
          ),
        { concurrency: "unbounded", discard: true }
      )
    )
    const create = (name: string, limits: Limits) =>
      Effect.tryPromise(async () => {
        const dirs = found.list.map((hierarchy) => Path.join(hierarchy.base, name))
        try {
          for (const [index, hierarchy] of found.list.entries()) {
            FsSync.mkdirSync(dirs[index]!, { recursive: true })
            for (const [file, value] of hierarchy.files(limits)) {
              try {
                FsSync.writeFileSync(Path.join(dirs[index]!, file), value)
              } catch (error) {
                // memory.swap.max is absent without swap accounting: the memory limit still holds.
                if (file !== "memory.swap.max") throw error
              }
            }
          }
        } catch (error) {
          await empty(dirs)
          throw error
        }
        return {
          procsFiles: dirs.map((dir) => Path.join(dir, "cgroup.procs")),
          destroy: Effect.promise(() => empty(dirs))
        } satisfies Group
      })
    return { mechanism: found.mechanism, create } satisfies Cgroups
  })
