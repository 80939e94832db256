import { assert } from "@effect/vitest"
import { Effect } from "effect"

/** Real waiting, outside any test clock: engines poll on the wall clock, and Postgres answers in real time. */
export const settle = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

/**
 * Reads `read` every 25 ms of real time until `done` accepts what it answers.
 * Past `timeoutMs` the test fails, naming the last answer: a wait that gave up
 * quietly would leave the next assertion to fail for the wrong reason.
 */
export const until = <A, E, R>(
  read: Effect.Effect<A, E, R>,
  done: (value: A) => boolean,
  timeoutMs = 10_000
) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    while (true) {
      const value = yield* read
      if (done(value)) return value
      if (Date.now() > deadline)
        return assert.fail(`not reached in ${timeoutMs / 1000} s; last read: ${JSON.stringify(value)}`)
      yield* settle(25)
    }
  })
