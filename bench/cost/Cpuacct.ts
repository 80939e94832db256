// The kernel's own count of CPU, by cgroup (v1's cpuacct controller): every
// process that ever ran in a group, the ones that exited included, to the
// nanosecond. The bench makes groups of its own below its cgroup and moves
// processes into them; the service's browsers each get one from the service
// (`src/runtimes/browser/Cgroups.ts`), below the service's.
import { execFileSync } from "node:child_process"
import * as FsSync from "node:fs"
import * as Path from "node:path"

const ROOT = "/sys/fs/cgroup"
/** Milliseconds in one clock tick, the unit of `/proc/<pid>/stat`'s times. */
const MS_PER_TICK = 1000 / (Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100)

/** This process's dir in the cpuacct hierarchy, or why there is none. */
const ownDir = (): string | { readonly missing: string } => {
  if (FsSync.existsSync(Path.join(ROOT, "cgroup.controllers")))
    return { missing: "this machine has cgroup v2; bench:cost reads cgroup v1's cpuacct controller" }
  for (const line of FsSync.readFileSync("/proc/self/cgroup", "utf8").trim().split("\n")) {
    const [, controllers = "", ...rest] = line.split(":")
    if (!controllers.split(",").includes("cpuacct")) continue
    const dir = Path.join(ROOT, controllers, rest.join(":"))
    if (FsSync.existsSync(Path.join(dir, "cpuacct.usage"))) return dir
  }
  return { missing: "no cgroup v1 cpuacct hierarchy is mounted under /sys/fs/cgroup" }
}

/** CPU used in the group at `dir` (and its descendants) so far, ms. */
export const usageMs = (dir: string) =>
  Number(FsSync.readFileSync(Path.join(dir, "cpuacct.usage"), "utf8")) / 1e6

/** The pids in the group at `dir` itself. */
export const pidsIn = (dir: string) =>
  FsSync.readFileSync(Path.join(dir, "cgroup.procs"), "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map(Number)

/** The cpuacct group of a process (the dir below the hierarchy's mount), or `undefined` once it has gone. */
export const groupOf = (pid: number): string | undefined => {
  try {
    for (const line of FsSync.readFileSync(`/proc/${pid}/cgroup`, "utf8").trim().split("\n")) {
      const [, controllers = "", ...rest] = line.split(":")
      if (controllers.split(",").includes("cpuacct")) return Path.join(ROOT, controllers, rest.join(":"))
    }
  } catch {
    // gone
  }
  return undefined
}

export interface Groups {
  /** The dir of the bench's group `name`, made on first use. */
  readonly dir: (name: string) => string
  /** Moves this process into group `name` (what it spawns from now on is born there). */
  readonly enter: (name: string) => void
  /** Moves this process back where it was. */
  readonly leave: () => void
  /** A script that joins group `name` and then runs `file` with its arguments. */
  readonly wrapper: (name: string, file: string) => string
  /** Leaves, and removes the groups once nothing runs in them. */
  readonly close: () => Promise<void>
}

export const open = (): Groups => {
  const home = ownDir()
  if (typeof home !== "string")
    throw new Error(`bench:cost needs a writable cgroup v1 cpuacct: ${home.missing}`)
  const base = Path.join(home, `rbs-cost-${process.pid}`)
  const made: Array<string> = []
  const dir = (name: string) => {
    const path = Path.join(base, name)
    if (!made.includes(path)) {
      FsSync.mkdirSync(path, { recursive: true })
      made.push(path)
    }
    return path
  }
  const move = (to: string) => FsSync.writeFileSync(Path.join(to, "cgroup.procs"), String(process.pid))
  const wrappers: Array<string> = []
  return {
    dir,
    enter: (name) => move(dir(name)),
    leave: () => move(home),
    wrapper: (name, file) => {
      const script = Path.join(FsSync.mkdtempSync("/tmp/rbs-cost-"), "run")
      FsSync.writeFileSync(
        script,
        `#!/bin/sh\necho $$ > ${JSON.stringify(Path.join(dir(name), "cgroup.procs"))} || exit 111\nexec ${JSON.stringify(file)} "$@"\n`,
        { mode: 0o755 }
      )
      wrappers.push(Path.dirname(script))
      return script
    },
    close: async () => {
      move(home)
      for (const path of [...made.reverse(), base]) {
        for (let attempt = 0; attempt < 50; attempt++) {
          try {
            FsSync.rmdirSync(path)
            break
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code === "ENOENT") break
            await new Promise((resolve) => setTimeout(resolve, 100))
          }
        }
      }
      for (const wrapper of wrappers) FsSync.rmSync(wrapper, { recursive: true, force: true })
    }
  }
}

/** A process's own CPU (utime + stime, ms), and that of the children it has reaped (cutime + cstime). */
export const procCpu = (pid: number): { self: number; reaped: number; ppid: number } | undefined => {
  try {
    const text = FsSync.readFileSync(`/proc/${pid}/stat`, "latin1")
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
    return {
      ppid: Number(fields[1]),
      self: (Number(fields[11]) + Number(fields[12])) * MS_PER_TICK,
      reaped: (Number(fields[13]) + Number(fields[14])) * MS_PER_TICK
    }
  } catch {
    return undefined
  }
}

/**
 * A process's CPU so far (ms, nanosecond-exact): the sum of its live threads'
 * on-CPU time from `/proc/<pid>/task/<tid>/schedstat`, where `procCpu` counts
 * clock ticks (10 ms): fine enough for a phase of a few milliseconds.
 */
export const threadsCpuMs = (pid: number): number => {
  let ns = 0
  for (const tid of FsSync.readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(FsSync.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "latin1").split(" ")[0])
    } catch {
      // the thread ended meanwhile
    }
  }
  return ns / 1e6
}

/** The pids whose parent is `pid`. */
export const childrenOf = (pid: number): Array<number> => {
  const found: Array<number> = []
  for (const name of FsSync.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    if (procCpu(Number(name))?.ppid === pid) found.push(Number(name))
  }
  return found
}

/**
 * CPU of a process and of every child it has or had, ms: itself, the
 * children it reaped, the children still running (their own CPU). What a
 * long-lived parent such as Postgres's postmaster spends with its backends.
 */
export const familyCpu = (pid: number) => {
  const parent = procCpu(pid)
  if (parent === undefined) return undefined
  let total = parent.self + parent.reaped
  for (const child of childrenOf(pid)) {
    const cpu = procCpu(child)
    if (cpu !== undefined) total += cpu.self + cpu.reaped
  }
  return total
}
