/**
 * The session actor's requests to its live runtime (a screenshot, a resize,
 * a page action), each bounded to 30 s. A failure is the runtime's
 * (`RuntimeFailed`) unless the session ended under it (`SessionGone`): the
 * session lives on either way.
 */
import { Effect, type Schema } from "effect"
import * as Cdp from "../../runtimes/shared/CdpClient.ts"
import * as PageActions from "../../runtimes/browser/PageActions.ts"
import type { LiveSession } from "../../runtime/LiveSessions.ts"
import { RuntimeFailed, SessionGone } from "./SessionRpcs.ts"

/** The requests on whatever `liveNow` says is the session's live runtime at the time of each. */
export const make = (liveNow: () => LiveSession | undefined) => {
  /**
   * `f` on the live runtime; a failure once the session has ended under it is `SessionGone`,
   * any other (a timeout too) `RuntimeFailed`.
   */
  const withRuntime = <A>(f: (live: LiveSession) => Effect.Effect<A, unknown>) =>
    Effect.suspend(() => {
      const live = liveNow()
      if (live === undefined) return Effect.fail(new SessionGone())
      return f(live).pipe(
        Effect.timeout("30 seconds"),
        Effect.catch((error): Effect.Effect<never, SessionGone | RuntimeFailed> =>
          liveNow() === live
            ? Effect.fail(new RuntimeFailed({ detail: String(error) }))
            : Effect.fail(new SessionGone())
        )
      )
    })

  return {
    screenshot: () =>
      withRuntime(({ runtime }) =>
        runtime.kind === "browser"
          ? Effect.tryPromise(() => Cdp.screenshot(runtime.browser.control, runtime.contextId))
          : Effect.die(new Error("a screenshot of a sandbox"))
      ),
    resize: (width: number, height: number) => withRuntime(({ runtime }) => runtime.resize(width, height)),
    // The page's refusal is the caller's answer, not a failed runtime: it passes through.
    drive: (action: PageActions.PageAction) =>
      withRuntime(({ runtime }) =>
        runtime.kind === "browser"
          ? Effect.tryPromise(() =>
              PageActions.onFrontPage(runtime.browser.control, runtime.contextId, action).then(
                (value) => ({ ok: true as const, value: value as Schema.Json }),
                (error: unknown) => {
                  if (error instanceof PageActions.PageActionFailed) return { ok: false as const, error }
                  throw error
                }
              )
            )
          : Effect.die(new Error("a page action in a sandbox"))
      ).pipe(
        Effect.flatMap((outcome) => (outcome.ok ? Effect.succeed(outcome.value) : Effect.fail(outcome.error)))
      )
  }
}
