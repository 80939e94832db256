import { Effect, Exit, Scope } from "effect"

/**
 * How long a retired browser lives on before it is killed: a session's answer
 * goes out first. Killing Chromium's ten or so processes and freeing their
 * memory keeps both cores of a small machine busy for 10-20 ms, and DELETE
 * took 17 ms instead of 11 (p50, idle machine) when the kill came at once.
 * The browser is cut off (egress closed, relays hung up) before this.
 */
const RETIRE_DELAY = "50 millis"

/**
 * The node's browser places: every browser holds one from before its launch
 * starts (so no two launches take the last one) until it has been reaped.
 * Each place is a Scope that owns its browser; the pool's closing closes the
 * ones still open, idle or handed out. `freed` runs whenever a place frees.
 */
export const make = (freed: () => Effect.Effect<unknown>) =>
  Effect.gen(function* () {
    const poolScope = yield* Scope.Scope
    const live = new Set<Scope.Closeable>()
    let closed = false

    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closed = true
        return Effect.forEach([...live], (scope) => Scope.close(scope, Exit.void), {
          concurrency: "unbounded",
          discard: true
        })
      })
    )

    // Once the pool has closed, no place is given: a launch still under way when the service
    // stopped (a session's start runs uninterrupted) would leave what it started with no one to end it.
    const reserve = Effect.gen(function* () {
      if (closed) return yield* Effect.interrupt
      const scope = yield* Scope.make()
      live.add(scope)
      // Runs last, once the browser is reaped: only then is its place free again.
      yield* Scope.addFinalizer(
        scope,
        Effect.suspend(() => {
          live.delete(scope)
          return freed()
        })
      )
      return scope
    })

    /** Closes a place in the background, after RETIRE_DELAY: a session ends without waiting for it. */
    const retire = (scope: Scope.Closeable) =>
      Effect.sleep(RETIRE_DELAY).pipe(
        Effect.andThen(Scope.close(scope, Exit.void).pipe(Effect.withSpan("session.teardown"))),
        Effect.forkIn(poolScope),
        Effect.asVoid
      )

    return { reserve, retire, count: () => live.size }
  })
