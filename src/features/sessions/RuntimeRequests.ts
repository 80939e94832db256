/**
 * The session actor's requests to its live runtime (a screenshot, a resize,
 * a page action), each bounded to 30 s. A failure is the runtime's
 * (`RuntimeFailed`) unless the session ended under it (`SessionGone`): the
 * session lives on either way.
 */
import { Effect, Schema } from "effect"
import { type PageAction, PageActionFailed } from "../../runtime/Drive.ts"
import { type LiveSession, markUsed } from "../../runtime/LiveSessions.ts"
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
      // A request is a use of the session, as a connection is: from its start and once it is answered.
      return Effect.andThen(markUsed(live), f(live)).pipe(
        Effect.ensuring(markUsed(live)),
        Effect.timeout("30 seconds"),
        Effect.catch((error): Effect.Effect<never, SessionGone | RuntimeFailed> =>
          liveNow() === live
            ? Effect.fail(new RuntimeFailed({ detail: String(error) }))
            : Effect.fail(new SessionGone())
        )
      )
    })

  return {
    // Its kind said it has a screen before the request was sent: a runtime without one is a defect.
    screenshot: () =>
      withRuntime(({ runtime }) => runtime.screenshot ?? Effect.die(new Error("a screenshot of no screen"))),
    resize: (width: number, height: number) => withRuntime(({ runtime }) => runtime.resize(width, height)),
    // The page's refusal is the caller's answer, not a failed runtime: it passes through.
    drive: (action: PageAction) =>
      withRuntime(({ runtime }) =>
        runtime.drive === undefined
          ? Effect.die(new Error("a page action with no page"))
          : runtime.drive(action).pipe(
              Effect.map((value) => ({ ok: true as const, value })),
              Effect.catchIf(Schema.is(PageActionFailed), (error) =>
                Effect.succeed({ ok: false as const, error })
              )
            )
      ).pipe(
        Effect.flatMap((outcome) => (outcome.ok ? Effect.succeed(outcome.value) : Effect.fail(outcome.error)))
      )
  }
}
