import { Effect } from "effect"
import * as FsSync from "node:fs/promises"
import * as Net from "node:net"
import * as Path from "node:path"
import * as Cdp from "../shared/CdpClient.ts"
import type { SelfTestReport } from "../../kernel/Sandbox.ts"
import type { SandboxRuntime, SessionRuntime } from "../../runtime/SessionRuntime.ts"
import * as OciSpec from "./OciSpec.ts"

interface Check {
  readonly name: string
  readonly ok: boolean
  readonly duration_ms: number
  readonly detail: string
}

const CHECK_TIMEOUT_MS = 10_000

/** Runs one check with a deadline; a throw or a timeout is a failed check with its reason. */
const check = async (name: string, run: () => Promise<{ ok: boolean; detail: string }>): Promise<Check> => {
  const started = performance.now()
  let timer: NodeJS.Timeout | undefined
  try {
    const outcome = await Promise.race([
      run(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS / 1000} s`)),
          CHECK_TIMEOUT_MS
        )
      })
    ])
    return { name, ...outcome, duration_ms: Math.round(performance.now() - started) }
  } catch (error) {
    return {
      name,
      ok: false,
      detail: error instanceof Error ? error.message : String(error),
      duration_ms: Math.round(performance.now() - started)
    }
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Asks the session's egress proxy for itself, which its SSRF guard refuses
 * whatever `EGRESS_ALLOW_CIDRS` allows (a service port): the 403 proves it
 * listens and guards, and a refused request moves no byte and costs nothing.
 */
const askProxy = (port: number) =>
  new Promise<{ ok: boolean; detail: string }>((resolve, reject) => {
    const socket = Net.connect(port, "127.0.0.1")
    let answer = ""
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => {
      answer += chunk
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(answer)
      if (status !== null) {
        socket.destroy()
        resolve({
          ok: status[1] === "403",
          detail: `the egress proxy answered ${status[1]} to a request for one of the service's ports (its SSRF guard; unbilled)`
        })
      }
    })
    socket.once("error", reject)
    socket.once("close", () => reject(new Error("the egress proxy closed without answering")))
    socket.write(
      `GET http://127.0.0.1:${port}/ HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`
    )
  })

const exec = async (runtime: SandboxRuntime, command: string) => {
  const out: Array<Buffer> = []
  const started = await runtime.sandbox.commands.start(
    { command, cwd: "/root", env: {}, background: false, timeoutMs: CHECK_TIMEOUT_MS },
    (_, data) => out.push(data)
  )
  started.write(Buffer.alloc(0), true)
  await started.done
  return { code: started.exitCode, output: Buffer.concat(out).toString().trim() }
}

const readLimit = (hierarchy: string, cgroupPath: string, file: string) =>
  FsSync.readFile(Path.join("/sys/fs/cgroup", hierarchy, cgroupPath, file), "utf8").then((text) =>
    text.trim()
  )

const sandboxChecks = (runtime: SandboxRuntime, limits: { memoryBytes: number; tasks: number }) => [
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
  check("egress", () => askProxy(runtime.proxyPort)),
  check("network", async () => {
    const { code, output } = await exec(runtime, "grep -c : /proc/net/dev; cat /proc/net/route | wc -l")
    const [interfaces, routes] = output.split("\n").map(Number)
    return {
      ok: code === 0 && interfaces === 1 && routes === 1,
      detail: `loopback only: ${interfaces} interface, ${(routes ?? 1) - 1} routes; the way out is the egress proxy at 127.0.0.1:${OciSpec.PROXY_PORT}`
    }
  }),
  check("limits", async () => {
    const memory = Number(await readLimit("memory", runtime.sandbox.cgroupPath, "memory.limit_in_bytes"))
    const tasks = Number(await readLimit("pids", runtime.sandbox.cgroupPath, "pids.max"))
    return {
      ok: memory === limits.memoryBytes && tasks === limits.tasks,
      detail: `memory ${memory} bytes, ${tasks} processes (its cgroup)`
    }
  })
]

const browserChecks = (runtime: Extract<SessionRuntime, { kind: "browser" }>) => [
  check("cdp", async () => {
    const version = (await runtime.browser.control.send("Browser.getVersion")) as { product?: string }
    return {
      ok: typeof version.product === "string",
      detail: `the browser answers over CDP (${version.product})`
    }
  }),
  check("render", async () => {
    const png = await Cdp.screenshot(runtime.browser.control, runtime.contextId)
    const isPng = png[0] === 0x89 && png[1] === 0x50
    return { ok: isPng, detail: `its page rendered a ${png.length}-byte PNG` }
  }),
  check("egress", () => askProxy(runtime.proxyPort))
]

/** `POST /v1/sessions/{id}/self-test` on the node that runs the session. */
export const run = (
  sessionId: string,
  runtime: SessionRuntime,
  limits: { memoryBytes: number; tasks: number }
): Effect.Effect<SelfTestReport> =>
  Effect.promise(async () => {
    const checks = await Promise.all(
      runtime.kind === "sandbox" ? sandboxChecks(runtime, limits) : browserChecks(runtime)
    )
    return {
      session_id: sessionId,
      session_type: runtime.kind,
      ok: checks.every((each) => each.ok),
      checks
    }
  })
