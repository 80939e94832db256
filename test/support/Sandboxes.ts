import { assert } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as FsSync from "node:fs"
import * as Path from "node:path"

/** Where a service of `dataDir` keeps its sandboxes, as the service derives it (src/runtimes/sandbox/SandboxHost.ts). */
export const hostOf = (dataDir: string) => {
  const tag = Crypto.createHash("sha256").update(Path.resolve(dataDir)).digest("hex").slice(0, 8)
  const own = FsSync.readFileSync("/proc/self/cgroup", "utf8")
    .trim()
    .split("\n")
    .map((line) => line.split(":"))
    .find((fields) => fields[1]?.split(",").includes("memory"))
  return {
    runcRoot: `/run/rbs-sbx-${tag}/runc`,
    sandboxesDir: Path.join(Path.resolve(dataDir), "sandboxes"),
    cgroupDirs: ["memory", "pids"].map((hierarchy) =>
      Path.join("/sys/fs/cgroup", hierarchy, own?.slice(2).join(":") ?? "/", `rbs-sandboxes-${tag}`)
    )
  }
}

export type Host = ReturnType<typeof hostOf>

/** The containers `runc list` shows running (not stopped) for the service's state dir. */
export const running = (host: Host) =>
  Effect.sync((): ReadonlyArray<string> => {
    if (!FsSync.existsSync(host.runcRoot)) return []
    const listed = ChildProcess.spawnSync("runc", ["--root", host.runcRoot, "list", "--format", "json"], {
      encoding: "utf8"
    })
    if (listed.status !== 0) return []
    const containers = (JSON.parse(listed.stdout || "null") ?? []) as ReadonlyArray<{
      id: string
      status: string
    }>
    return containers.filter((container) => container.status !== "stopped").map((container) => container.id)
  })

/** The containers `runc list` shows for the service's state dir. */
export const containers = (host: Host) =>
  Effect.sync((): ReadonlyArray<string> => {
    if (!FsSync.existsSync(host.runcRoot)) return []
    // runc list fails on a container removed between its read of the root and of that container's state.
    for (let attempt = 1; ; attempt++) {
      const listed = ChildProcess.spawnSync("runc", ["--root", host.runcRoot, "list", "--quiet"], {
        encoding: "utf8"
      })
      if (listed.status === 0) return listed.stdout.split("\n").filter((line) => line !== "")
      if (attempt >= 5 || !/stat .*: no such file or directory/.test(listed.stderr)) {
        throw new Error(`runc list exited with ${listed.status}: ${listed.stderr.trim()}`)
      }
    }
  })

/** The first process of container `id`; `undefined` once it is gone (removed since it was listed). */
const firstPid = (host: Host, id: string): number | undefined => {
  let text: string
  try {
    text = ChildProcess.execFileSync("runc", ["--root", host.runcRoot, "state", id], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"]
    })
  } catch {
    return undefined
  }
  return (JSON.parse(text) as { pid?: number }).pid
}

/** The container whose first process is `pid`, as `runc state` shows it. */
export const containerOf = (host: Host, pid: number) =>
  Effect.flatMap(containers(host), (ids) => {
    // Another sandbox of the service may end between the list and its state.
    const found = ids.find((id) => firstPid(host, id) === pid)
    return found === undefined ? Effect.die(new Error(`no container runs pid ${pid}`)) : Effect.succeed(found)
  })

/** What a sandbox could leave behind: containers, mounts, cgroups, dirs. */
export const leftovers = (host: Host) =>
  Effect.gen(function* () {
    const mounts = FsSync.readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((line) => line.split(" ")[4] ?? "")
      .filter((point) => point.startsWith(`${host.sandboxesDir}/`))
    const cgroups = host.cgroupDirs.flatMap((dir) =>
      FsSync.existsSync(dir)
        ? FsSync.readdirSync(dir, { withFileTypes: true })
            .filter((entry) => entry.isDirectory())
            .map((entry) => Path.join(dir, entry.name))
        : []
    )
    const dirs = FsSync.existsSync(host.sandboxesDir) ? FsSync.readdirSync(host.sandboxesDir) : []
    return { containers: yield* containers(host), mounts, cgroups, dirs }
  })

/**
 * Waits (10 s at most) until nothing of the container `id` is left, and
 * nothing of any container that no longer runs (a warm sandbox the pool keeps
 * may run on).
 */
export const awaitGone = (host: Host, id: string, after = "") =>
  Effect.gen(function* () {
    const stale = (left: Effect.Success<ReturnType<typeof leftovers>>) => {
      const running = new Set(left.containers.filter((each) => each !== id))
      const owner = (path: string) => [...running].some((each) => path.includes(each))
      return {
        containers: left.containers.filter((each) => each === id),
        mounts: left.mounts.filter((path) => !owner(path)),
        cgroups: left.cgroups.filter((path) => !owner(path)),
        dirs: left.dirs.filter((path) => !owner(path))
      }
    }
    let left = stale(yield* leftovers(host))
    for (let i = 0; i < 100; i++) {
      if (Object.values(left).every((list) => list.length === 0)) return
      yield* Effect.promise(() => new Promise((done) => setTimeout(done, 100)))
      left = stale(yield* leftovers(host))
    }
    assert.deepStrictEqual(left, { containers: [], mounts: [], cgroups: [], dirs: [] }, after)
  })

/** Waits (10 s at most) until nothing of any sandbox is left. */
export const awaitNothingLeft = (host: Host, after = "") =>
  Effect.gen(function* () {
    let left = yield* leftovers(host)
    for (let i = 0; i < 100; i++) {
      if (Object.values(left).every((list) => list.length === 0)) return
      yield* Effect.promise(() => new Promise((done) => setTimeout(done, 100)))
      left = yield* leftovers(host)
    }
    assert.deepStrictEqual(left, { containers: [], mounts: [], cgroups: [], dirs: [] }, after)
  })

/**
 * Removes what a service process of `dataDir` left (a test that killed it
 * and failed before its next start cleaned up): containers, then mounts.
 */
export const reap = (dataDir: string) =>
  Effect.sync(() => {
    const host = hostOf(dataDir)
    if (FsSync.existsSync(host.runcRoot)) {
      const ids = ChildProcess.execFileSync("runc", ["--root", host.runcRoot, "list", "--quiet"], {
        encoding: "utf8"
      })
      for (const id of ids.split("\n").filter((line) => line !== "")) {
        ChildProcess.spawnSync("runc", ["--root", host.runcRoot, "delete", "--force", id])
      }
    }
    const mounts = FsSync.readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((line) => line.split(" ")[4] ?? "")
      .filter((point) => point.startsWith(`${host.sandboxesDir}/`))
      .sort((a, b) => b.length - a.length)
    for (const point of mounts) ChildProcess.spawnSync("umount", ["--lazy", point])
  })
