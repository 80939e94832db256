import { Effect } from "effect"
import * as FsSync from "node:fs/promises"
import * as Path from "node:path"
import type { Commands } from "./Commands.ts"
import * as OciSpec from "./OciSpec.ts"
import type { EgressTap } from "../../runtime/EgressTap.ts"
import { CHECK_TIMEOUT_MS, check, report } from "../../runtime/SelfTestChecks.ts"

/** What a sandbox's self-test looks at: its commands, its cgroup and its egress proxy. */
interface Tested {
  readonly commands: Commands
  readonly cgroupPath: string
  readonly egress: EgressTap
}

// A Promise for the shared checks' deadline; a command that cannot start fails the check with its reason.
const exec = (runtime: Tested, command: string) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const out: Array<Buffer> = []
      const started = yield* runtime.commands.start(
        { command, cwd: "/root", env: {}, background: false, timeoutMs: CHECK_TIMEOUT_MS },
        (_, data) => out.push(data)
      )
      started.write(Buffer.alloc(0), true)
      yield* started.done
      return { code: started.exitCode, output: Buffer.concat(out).toString().trim() }
    })
  )

const readLimit = (hierarchy: string, cgroupPath: string, file: string) =>
  FsSync.readFile(Path.join("/sys/fs/cgroup", hierarchy, cgroupPath, file), "utf8").then((text) =>
    text.trim()
  )

const sandboxChecks = (runtime: Tested, limits: { readonly memoryBytes: number; readonly tasks: number }) => [
  check("exec", async () => {
    const { code } = await exec(runtime, "true")
    return { ok: code === 0, detail: `a command ran (exit ${code})` }
  }),
  check("disk", async () => {
    const { code, output } = await exec(
      runtime,
      "f=/root/.rbs-self-test; head -c 1048576 /dev/zero > $f && wc -c < $f && rm -f $f"
    )
    return {
      ok: code === 0 && output === "1048576",
      detail: `1 MiB written, read back and removed (${output} bytes)`
    }
  }),
  check("egress", runtime.egress.probe),
  check("network", async () => {
    const { code, output } = await exec(runtime, "grep -c : /proc/net/dev; cat /proc/net/route | wc -l")
    const [interfaces, routes] = output.split("\n").map(Number)
    return {
      ok: code === 0 && interfaces === 1 && routes === 1,
      detail: `loopback only: ${interfaces} interface, ${(routes ?? 1) - 1} routes; the way out is the egress proxy at 127.0.0.1:${OciSpec.PROXY_PORT}`
    }
  }),
  check("limits", async () => {
    const memory = Number(await readLimit("memory", runtime.cgroupPath, "memory.limit_in_bytes"))
    const tasks = Number(await readLimit("pids", runtime.cgroupPath, "pids.max"))
    return {
      ok: memory === limits.memoryBytes && tasks === limits.tasks,
      detail: `memory ${memory} bytes, ${tasks} processes (its cgroup)`
    }
  })
]

/** `POST /v1/sessions/{id}/self-test` of a sandbox: exec, disk, egress, network and its limits. */
export const selfTest =
  (runtime: Tested, limits: { readonly memoryBytes: number; readonly tasks: number }) =>
  (sessionId: string) =>
    report(sessionId, "sandbox", sandboxChecks(runtime, limits))
