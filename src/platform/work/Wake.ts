import { PgClient } from "@effect/sql-pg"
import { Effect, Option, Queue, Schedule } from "effect"

/**
 * Waits on the wall clock, not `Clock`: a work loop's poll is an operational
 * beat, and what is due is decided by comparing `Clock` times in the claim.
 * Under a TestClock a moved clock is then seen whole at the next poll or
 * wake-up, never by a poll resumed halfway through the move.
 */
export const pollPause = (ms: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

/**
 * Wakes a work loop on every `NOTIFY` of `channel` (commits that make work
 * send one, to every node), and once each time it starts listening (commits
 * made while no one listened notified no one). Each notification's payload
 * goes to `onPayload` too. `listening()` says whether notifications arrive
 * now: until then, the loop polls at its short pace. Without Postgres
 * (another SQL client) nothing listens.
 */
export const listen = (
  channel: string,
  wake: Queue.Queue<void>,
  onPayload: (payload: string) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.gen(function* () {
    let listening = false
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (Option.isSome(pg)) {
      const loop = Effect.gen(function* () {
        const notifications = yield* pg.value.listen(channel)
        listening = true
        yield* Queue.offer(wake, undefined)
        yield* Queue.take(notifications).pipe(
          Effect.flatMap((notification) => onPayload(notification.payload)),
          Effect.andThen(Queue.offer(wake, undefined)),
          Effect.forever
        )
      }).pipe(
        Effect.ensuring(Effect.sync(() => (listening = false))),
        Effect.scoped,
        Effect.retry(Schedule.spaced("1 second")),
        Effect.ignore
      )
      yield* Effect.forkScoped(loop)
    }
    return { listening: () => listening }
  })
