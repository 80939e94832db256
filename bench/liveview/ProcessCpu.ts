// CPU time of a process tree from /proc (Linux): the service's own process,
// its Chromiums and its Postgres apart.
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs/promises"

const TICKS = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100

interface Proc {
  readonly pid: number
  readonly ppid: number
  /** utime + stime, in seconds. */
  readonly cpu: number
  readonly cmdline: string
}

const read = async (pid: number): Promise<Proc | undefined> => {
  const stat = await Fs.readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined)
  if (stat === undefined) return undefined
  // Fields after the command name, which may hold spaces: state is field 3.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  const cmdline = await Fs.readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")
  return {
    pid,
    ppid: Number(fields[1]),
    cpu: (Number(fields[11]) + Number(fields[12])) / TICKS,
    cmdline: cmdline.replaceAll("\0", " ")
  }
}

export type Part = "service" | "browsers" | "postgres" | "other"

/** CPU seconds used so far by `root` and each of its descendants, summed by part. */
export const treeCpu = async (root: number): Promise<Record<Part, number>> => {
  const pids = (await Fs.readdir("/proc")).filter((name) => /^\d+$/.test(name)).map(Number)
  const procs = (await Promise.all(pids.map(read))).filter((proc): proc is Proc => proc !== undefined)
  const children = new Map<number, Array<Proc>>()
  for (const proc of procs) children.set(proc.ppid, [...(children.get(proc.ppid) ?? []), proc])
  const totals: Record<Part, number> = { service: 0, browsers: 0, postgres: 0, other: 0 }
  const visit = (proc: Proc) => {
    const part: Part =
      proc.pid === root
        ? "service"
        : /chromium|chrome/.test(proc.cmdline)
          ? "browsers"
          : /postgres/.test(proc.cmdline)
            ? "postgres"
            : "other"
    totals[part] += proc.cpu
    for (const child of children.get(proc.pid) ?? []) visit(child)
  }
  const top = procs.find((proc) => proc.pid === root)
  if (top !== undefined) visit(top)
  return totals
}

/** CPU seconds each part used while `during` ran. */
export const cpuDuring = async <A>(root: number, during: () => Promise<A>) => {
  const before = await treeCpu(root)
  const value = await during()
  const after = await treeCpu(root)
  const used = Object.fromEntries(
    (Object.keys(after) as Array<Part>).map((part) => [part, after[part] - before[part]])
  ) as Record<Part, number>
  return { used, value }
}
