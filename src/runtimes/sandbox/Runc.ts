import { Schema } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"

/** The CFS period of every sandbox's CPU quota, in microseconds. */
export const CPU_PERIOD_US = 100_000

/** The quota of `cpus` CPUs per period (1.5: 150 ms of CPU time every 100 ms). */
export const cpuQuota = (cpus: number) => Math.round(cpus * CPU_PERIOD_US)

/** What `update` sets. */
export interface UpdateLimits {
  readonly memoryBytes: number
  readonly tasks: number
  readonly cpus: number
  /** Whether the machine accounts swap per cgroup: memory and swap together then get the limit too. */
  readonly limitSwap: boolean
}

/** A container as `runc list` shows it. */
const ContainerState = Schema.Struct({ id: Schema.String, pid: Schema.Number, status: Schema.String })
export type ContainerState = typeof ContainerState.Type
const decodeList = Schema.decodeUnknownSync(Schema.NullOr(Schema.Array(ContainerState)))

const exec = (file: string, args: ReadonlyArray<string>, timeoutMs = 30_000) =>
  new Promise<string>((resolve, reject) => {
    ChildProcess.execFile(
      file,
      [...args],
      { timeout: timeoutMs, maxBuffer: 8 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error !== null)
          reject(
            new Error(
              `runc ${args.find((a) => !a.startsWith("-")) ?? ""}: ${(stderr || error.message).trim()}`
            )
          )
        else resolve(stdout)
      }
    )
  })

/** `runc list` failed on a container's state dir that was removed after the root's dir was read. */
const removedWhileListed = (error: unknown) =>
  error instanceof Error && /stat .*: no such file or directory/.test(error.message)

/**
 * runc, Debian's package, with a state dir of this service's own (`root`),
 * so `list` shows only its containers and another runc user never sees them.
 */
export const make = (runcPath: string, root: string) => {
  const base = ["--root", root]

  /**
   * Starts the container of `bundle` detached (`run -d`): runc returns once
   * its first process runs. Its output goes to `log`.
   */
  const run = async (id: string, bundle: string, log: string): Promise<number> => {
    const pidFile = Path.join(bundle, "container.pid")
    const out = await Fs.open(log, "a")
    try {
      await new Promise<void>((resolve, reject) => {
        const child = ChildProcess.spawn(
          runcPath,
          [...base, "run", "--detach", "--bundle", bundle, "--pid-file", pidFile, id],
          { stdio: ["ignore", out.fd, out.fd] }
        )
        child.once("error", reject)
        child.once("exit", (code) => {
          if (code === 0) return resolve()
          // runc says why on its output (JSON lines): the last of it is the reason.
          void Fs.readFile(log, "utf8")
            .catch(() => "")
            .then((text) => reject(new Error(`runc run exited with ${code}: ${text.trim().slice(-600)}`)))
        })
      })
    } finally {
      await out.close()
    }
    return Number((await Fs.readFile(pidFile, "utf8")).trim())
  }

  /**
   * Changes a running container's cgroup limits in place (a warm sandbox
   * handed to a session that asked for other resources): runc 1.1 has no
   * `--cpus`, so the quota per 100 ms period; memory with swap where the
   * machine accounts it (runc orders the two writes so neither is refused).
   * About 8 ms from the command line here, 25 ms more from create to ready.
   */
  const update = (id: string, limits: UpdateLimits) =>
    exec(runcPath, [
      ...base,
      "update",
      "--memory",
      String(limits.memoryBytes),
      ...(limits.limitSwap ? ["--memory-swap", String(limits.memoryBytes)] : []),
      "--pids-limit",
      String(limits.tasks),
      "--cpu-period",
      String(CPU_PERIOD_US),
      "--cpu-quota",
      String(cpuQuota(limits.cpus)),
      id
    ]).then(() => undefined)

  const kill = (id: string, signal = "KILL") =>
    exec(runcPath, [...base, "kill", id, signal]).then(() => undefined)

  /** Removes a container whatever its state (its processes killed, its cgroup removed). */
  const remove = (id: string) => exec(runcPath, [...base, "delete", "--force", id]).then(() => undefined)

  /**
   * The root's containers. `runc list` reads the root's dir, then each
   * container's state, and fails when a container is removed between the
   * two; it is asked again (five times at most) rather than read as empty.
   */
  const list = async (): Promise<ReadonlyArray<ContainerState>> => {
    for (let attempt = 1; ; attempt++) {
      try {
        const text = await exec(runcPath, [...base, "list", "--format", "json"])
        return decodeList(JSON.parse(text.trim() === "" ? "null" : text)) ?? []
      } catch (error) {
        if (attempt >= 5 || !removedWhileListed(error)) throw error
      }
    }
  }

  return { run, update, kill, remove, list, root }
}

export type Runc = ReturnType<typeof make>
