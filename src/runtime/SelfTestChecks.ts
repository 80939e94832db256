import { Effect } from "effect"
import type { SelfTestReport } from "../kernel/Sandbox.ts"
import type { SessionType } from "../kernel/Session.ts"
import type { SessionRuntime } from "./SessionRuntime.ts"

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
  runtime.selfTest?.(sessionId) ?? report(sessionId, runtime.kind, [check("egress", runtime.egress.probe)])
