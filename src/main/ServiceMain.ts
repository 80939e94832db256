import { Cause, Deferred, Effect, Exit, Layer, Runtime } from "effect"
import { NodeDrain } from "../platform/cluster/NodeDrain.ts"

/** What the first SIGTERM does while a service runs: begins its drain. */
let onTerm: (() => void) | undefined

/**
 * The service of `layer` until it is stopped. The first SIGTERM drains it
 * (`NodeDrain`: no new sessions, `/readyz` 503 `draining`, the live ones
 * served until they end or `DRAIN_SECONDS` passes), then it stops: its
 * scope closes, and what is still open ends as `server_restart`.
 */
export const serve = <E>(layer: Layer.Layer<NodeDrain, E>) =>
  Effect.gen(function* () {
    const drain = yield* NodeDrain
    const term = yield* Deferred.make<void>()
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        onTerm = () => Deferred.doneUnsafe(term, Effect.void)
      }),
      () =>
        Effect.sync(() => {
          onTerm = undefined
        })
    )
    yield* Deferred.await(term)
    yield* drain.drain
  }).pipe(Effect.scoped, Effect.provide(layer))

/**
 * `NodeRuntime.runMain` with a drain: SIGINT stops the program at once (its
 * finalizers run), and so does SIGTERM, except the first one while `serve`
 * runs, which begins the drain; a second SIGTERM or a SIGINT during the
 * drain ends it at once. Exit 0 on a stop by signal.
 */
export const runMain = Runtime.makeRunMain(({ fiber, teardown }) => {
  let signalled = false
  const stopNow = () => {
    signalled = true
    fiber.interruptUnsafe(fiber.id)
  }
  const onSigterm = () => {
    const drain = onTerm
    onTerm = undefined
    if (signalled || drain === undefined) return stopNow()
    signalled = true
    drain()
  }
  fiber.addObserver((exit) => {
    process.removeListener("SIGINT", stopNow)
    process.removeListener("SIGTERM", onSigterm)
    teardown(exit, (code) => {
      if (signalled || code !== 0) process.exit(code)
    })
  })
  process.on("SIGINT", stopNow)
  process.on("SIGTERM", onSigterm)
})

/** Exit 0 for success or a stop by signal, 1 for a failure. */
export const exitCode = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isSuccess(exit) || (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)) ? 0 : 1
