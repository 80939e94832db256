import { Context, Deferred, Effect, Exit, Layer, Metric, Option, Queue, Scope } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"
import { ServiceConfig } from "../Config.ts"
import * as Chromium from "./Chromium.ts"

export const DEFAULT_WIDTH = 1280
export const DEFAULT_HEIGHT = 720

interface Pooled {
  readonly browser: Chromium.LaunchedBrowser
  readonly scope: Scope.Closeable
}

export const poolIdle = Metric.gauge("rbs_browser_pool_idle", {
  description: "Warm browsers waiting in the pool"
})
export const poolLaunches = Metric.counter("rbs_browser_launches_total", {
  description: "Chromium processes launched"
})

/**
 * Pre-launched browsers, so a session starts on a running Chromium instead of
 * waiting for a cold launch. `acquire` hands one over to the caller's scope
 * (which then owns its teardown) and wakes the refill fiber.
 */
export class BrowserPool extends Context.Service<
  BrowserPool,
  {
    readonly acquire: Effect.Effect<Chromium.LaunchedBrowser, Chromium.BrowserLaunchError, Scope.Scope>
    /** Browsers waiting in the pool right now. */
    readonly idle: Effect.Effect<number>
    readonly target: number
    /** Completes once the pool has launched its first browser (or failed to). */
    readonly ready: Effect.Effect<boolean>
  }
>()("rbs/browser/BrowserPool") {
  static readonly layerNoDeps = Layer.effect(
    BrowserPool,
    Effect.gen(function* () {
      const config = yield* ServiceConfig
      const profilesDir = Path.join(config.dataDir, "profiles")
      const target = Math.max(0, config.browserPoolSize)
      const maxParallelLaunches = Math.max(1, Math.min(4, Os.availableParallelism()))
      const options: Chromium.LaunchOptions = {
        chromePath: config.chromePath,
        profilesDir,
        width: DEFAULT_WIDTH,
        height: DEFAULT_HEIGHT
      }

      // Browsers of a process that died without cleaning up.
      yield* Chromium.reapOrphans(profilesDir)

      const idle = yield* Queue.unbounded<Pooled>()
      const live = new Set<Scope.Closeable>()
      const wake = yield* Queue.sliding<void>(1)
      const firstLaunch = yield* Deferred.make<boolean>()

      // Whatever is still alive when the service stops (idle or handed out) dies with the pool.
      yield* Effect.addFinalizer(() =>
        Effect.forEach([...live], (scope) => Scope.close(scope, Exit.void), {
          concurrency: "unbounded",
          discard: true
        })
      )

      const launchInto = (scope: Scope.Scope) =>
        Chromium.launch(options).pipe(
          Scope.provide(scope),
          Effect.tap(() => Effect.all([Metric.update(poolLaunches, 1), Deferred.succeed(firstLaunch, true)]))
        )

      const launchOwned = Effect.gen(function* () {
        const scope = yield* Scope.make()
        live.add(scope)
        yield* Scope.addFinalizer(
          scope,
          Effect.sync(() => live.delete(scope))
        )
        const browser = yield* launchInto(scope).pipe(Effect.onError(() => Scope.close(scope, Exit.void)))
        return { browser, scope } satisfies Pooled
      })

      const isAlive = (pooled: Pooled) => !Deferred.isDoneUnsafe(pooled.browser.exited)

      // Launching is CPU-bound: a few at a time finish sooner than all at once.
      // Sessions waiting for a browser raise the target, so they wait for the
      // launches already under way instead of starting more of their own.
      let launching = 0
      let waiting = 0
      let lastError: Chromium.BrowserLaunchError | undefined

      const launchOne = launchOwned.pipe(
        Effect.flatMap((pooled) => Queue.offer(idle, pooled)),
        Effect.tap(() => Effect.sync(() => (lastError = undefined))),
        Effect.tapError((error) =>
          Effect.sync(() => (lastError = error)).pipe(
            Effect.andThen(Effect.logError("browser.pool.launch_failed", { error: error.message })),
            Effect.andThen(Effect.sleep("2 seconds"))
          )
        ),
        Effect.ignore,
        Effect.ensuring(
          Effect.suspend(() => {
            launching--
            return Queue.offer(wake, undefined)
          })
        )
      )

      const refill = Effect.gen(function* () {
        yield* Metric.update(poolIdle, yield* Queue.size(idle))
        while ((yield* Queue.size(idle)) + launching < target + waiting && launching < maxParallelLaunches) {
          launching++
          yield* Effect.forkScoped(launchOne)
        }
      })

      yield* Effect.forkScoped(Effect.forever(Effect.andThen(refill, Queue.take(wake))))
      if (target === 0) yield* Deferred.succeed(firstLaunch, true)

      const takeIdle: Effect.Effect<Pooled | undefined> = Effect.gen(function* () {
        while (true) {
          const next = yield* Queue.poll(idle)
          if (next._tag === "None") return undefined
          if (isAlive(next.value)) return next.value
          yield* Scope.close(next.value.scope, Exit.void)
        }
      })

      const awaitLaunched = Effect.acquireUseRelease(
        Effect.sync(() => waiting++).pipe(Effect.andThen(Queue.offer(wake, undefined))),
        () =>
          Queue.take(idle).pipe(
            Effect.timeoutOption("30 seconds"),
            Effect.flatMap(
              Option.match({
                onSome: Effect.succeed,
                onNone: () =>
                  Effect.fail(
                    lastError ??
                      new Chromium.BrowserLaunchError({ message: "no browser launched within 30 seconds" })
                  )
              })
            )
          ),
        () => Effect.sync(() => waiting--)
      )

      // Only the hand-over is uninterruptible: a browser is either still the
      // pool's or already in the caller's scope, never in between.
      const acquire = Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          let pooled = yield* takeIdle
          while (pooled === undefined) {
            const launched = yield* restore(awaitLaunched)
            if (isAlive(launched)) pooled = launched
            else yield* Scope.close(launched.scope, Exit.void)
          }
          yield* Queue.offer(wake, undefined)
          const caller = yield* Scope.Scope
          yield* Scope.addFinalizer(caller, Scope.close(pooled.scope, Exit.void))
          return pooled.browser
        })
      ).pipe(Effect.withSpan("BrowserPool.acquire"))

      return BrowserPool.of({
        acquire,
        idle: Queue.size(idle),
        target,
        ready: Deferred.await(firstLaunch)
      })
    })
  )

  static readonly layer = this.layerNoDeps
}
