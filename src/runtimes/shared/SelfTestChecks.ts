import { Effect } from "effect"
import * as Net from "node:net"
import type { SelfTestReport } from "../../kernel/Sandbox.ts"
import type { SessionType } from "../../kernel/Session.ts"
import type { SessionRuntime } from "../../runtime/SessionRuntime.ts"

// The self-test's checks (`POST /v1/sessions/{id}/self-test`), run on the
// node that holds the session: each runtime's own, and the egress proxy's,
// which every runtime has.

export interface Check {
  readonly name: string
  readonly ok: boolean
  readonly duration_ms: number
  readonly detail: string
}

export const CHECK_TIMEOUT_MS = 10_000

/** Runs one check with a deadline; a throw or a timeout is a failed check with its reason. */
export const check = async (
  name: string,
  run: () => Promise<{ ok: boolean; detail: string }>
): Promise<Check> => {
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
export const askProxy = (port: number) =>
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

/** The report of `checks`, run at once, for a session of `sessionType`. */
export const report = (
  sessionId: string,
  sessionType: SessionType,
  checks: ReadonlyArray<Promise<Check>>
): Effect.Effect<SelfTestReport> =>
  Effect.promise(async () => {
    const done = await Promise.all(checks)
    return {
      session_id: sessionId,
      session_type: sessionType,
      ok: done.every((each) => each.ok),
      checks: done
    }
  })

/** A runtime's self-test: its own checks, or, for a runtime with none, its egress proxy's. */
export const run = (sessionId: string, runtime: SessionRuntime) =>
  runtime.selfTest?.(sessionId) ??
  report(sessionId, runtime.kind, [check("egress", () => askProxy(runtime.proxyPort))])
