import { Clock, Context, Deferred, Effect, Exit, Layer, Metric, Option, Queue, Scope } from "effect"
import * as Os from "node:os"
import { ServiceConfig } from "../Config.ts"
import { EgressProxies, type EgressTap } from "../egress/EgressProxy.ts"
import type { EgressRegion } from "../egress/Regions.ts"
import * as Chromium from "./Chromium.ts"
import { BrowserIsolation } from "./Isolation.ts"
import * as PoolLauncher from "./PoolLauncher.ts"
import * as PoolPlaces from "./PoolPlaces.ts"
import { browsersLive, poolAcquires, poolIdle, poolTarget } from "./PoolMetrics.ts"
import { defaultCapacity, demandRate, launchEstimate, pruneArrivals, warmTarget } from "./PoolSizing.ts"

interface Pooled extends PoolLauncher.Launched {
  readonly scope: Scope.Closeable
}

/** What a session needs from a browser. */
export interface BrowserRequest {
  /** The egress region the browser's proxy is bound to. */
  readonly region: EgressRegion
  /**
   * A profile dir to run on and keep (a persistent profile). A warm browser
   * has a fresh one, so this takes the cold path: a launch of its own.
   */
  readonly profileDir?: string | undefined
}

/** A browser handed to a session, with its egress already bound to it. */
export interface AcquiredBrowser {
  readonly browser: Chromium.LaunchedBrowser
  readonly egress: EgressTap
}

/**
 * Pre-launched browsers, so a session starts on a running Chromium instead of
 * waiting for a cold launch. Each is launched with its own egress proxy
 * listening (all its traffic goes there) but bound to no session: `acquire`
 * binds that proxy to the session's region, hands browser and proxy over to
 * the caller's scope (which then owns their teardown) and wakes the refill
 * fiber.
 */
export class BrowserPool extends Context.Service<
  BrowserPool,
  {
    readonly acquire: (
      request: BrowserRequest
    ) => Effect.Effect<AcquiredBrowser, Chromium.BrowserLaunchError, Scope.Scope>
    /**
     * Closes a scope holding an acquired browser in the background (the
     * process group's exit, the cgroup, the profile dir, the uid): a session
     * ends without waiting for it. The pool's own closing waits for it.
     */
    readonly retire: (scope: Scope.Closeable) => Effect.Effect<void>
    /** Browsers waiting in the pool right now. */
    readonly idle: Effect.Effect<number>
    /** Warm browsers the pool aims for now. */
    readonly target: Effect.Effect<number>
    /** `MAX_BROWSERS`: this node never runs more browsers than this. */
    readonly capacity: number
    /** Completes once the pool has launched its first browser (or failed to). */
    readonly ready: Effect.Effect<boolean>
  }
>()("rbs/browser/BrowserPool") {
  static readonly layerNoDeps = Layer.effect(
    BrowserPool,
    Effect.gen(function* () {
      const config = yield* ServiceConfig
      const launcher = yield* PoolLauncher.make
      const floor = Math.max(0, config.browserPoolSize)
      const capacity = Math.max(
        1,
        config.maxBrowsers ?? defaultCapacity(Os.totalmem(), Os.availableParallelism())
      )
      // Two launches a core at a time: a launch waits on the disk and on process start-up as much as
      // on the CPU, and one a core let creates queue behind slow launches under load (open-loop bench).
      const maxParallelLaunches = Math.max(4, 2 * Os.availableParallelism())
      // Browsers of a process that died without cleaning up.
      yield* Chromium.reapOrphans(launcher.profilesDir)

      const idle = yield* Queue.unbounded<Pooled>()
      const wake = yield* Queue.sliding<void>(1)
      const firstLaunch = yield* Deferred.make<boolean>()

      const places = yield* PoolPlaces.make(() => Queue.offer(wake, undefined))
      const launchOwned = (scope: Scope.Closeable, profileDir?: string) =>
        launcher.launch(scope, profileDir).pipe(
          Effect.tap(() => Deferred.succeed(firstLaunch, true)),
          Effect.onError(() => Scope.close(scope, Exit.void)),
          Effect.map((launched) => ({ ...launched, scope }) satisfies Pooled)
        )

      const isAlive = (pooled: Pooled) => !Deferred.isDoneUnsafe(pooled.browser.exited)

      // Launching is CPU-bound: a few at a time finish sooner than all at once.
      // Sessions waiting for a browser raise the target, so they wait for the
      // launches already under way instead of starting more of their own.
      let launching = 0
      let waiting = 0
      let lastError: Chromium.BrowserLaunchError | undefined

      // Demand and supply, for the adaptive target.
      const arrivals: Array<number> = []
      let lastAcquire = 0

      const launchOne = (scope: Scope.Closeable) =>
        launchOwned(scope).pipe(
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

      const currentTarget = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        pruneArrivals(arrivals, now)
        const idleNow = yield* Queue.size(idle)
        return warmTarget({
          rate: demandRate(arrivals, now),
          launchSeconds: launchEstimate(launcher.recentLaunches),
          floor,
          capacity,
          busy: places.count() - idleNow - launching
        })
      })

      const refill = Effect.gen(function* () {
        const target = yield* currentTarget
        yield* Metric.update(poolTarget, target)
        yield* Metric.update(browsersLive, places.count())
        yield* Metric.update(poolIdle, yield* Queue.size(idle))
        // Never a browser that cannot be placed: the node's capacity counts every browser it has.
        while (
          (yield* Queue.size(idle)) + launching < target + waiting &&
          launching < maxParallelLaunches &&
          places.count() < capacity
        ) {
          launching++
          yield* Effect.forkScoped(launchOne(yield* places.reserve))
        }
        // Demand fell: after a quiet half minute, warm browsers beyond the target go.
        const now = yield* Clock.currentTimeMillis
        if (waiting === 0 && now - lastAcquire > 30_000 && (yield* Queue.size(idle)) > target) {
          const extra = yield* Queue.poll(idle)
          if (extra._tag === "Some") yield* Scope.close(extra.value.scope, Exit.void)
        }
      })

      yield* Effect.forkScoped(Effect.forever(Effect.andThen(refill, Queue.take(wake))))
      // The target moves with time too (a lull), not only on acquires and launches.
      yield* Effect.forkScoped(
        Effect.forever(Effect.andThen(Effect.sleep("5 seconds"), Queue.offer(wake, undefined)))
      )
      if (floor === 0) yield* Deferred.succeed(firstLaunch, true)

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

      const handOver = (pooled: Pooled, request: BrowserRequest) =>
        Effect.gen(function* () {
          const caller = yield* Scope.Scope
          yield* Scope.addFinalizer(caller, Scope.close(pooled.scope, Exit.void))
          return {
            browser: pooled.browser,
            egress: pooled.egress.bind(request.region)
          } satisfies AcquiredBrowser
        })

      // Only the hand-over is uninterruptible: a browser is either still the
      // pool's or already in the caller's scope, never in between.
      const acquireWarm = (request: BrowserRequest) =>
        Effect.uninterruptibleMask((restore) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            arrivals.push(now)
            lastAcquire = now
            let pooled = yield* takeIdle
            yield* Metric.update(
              Metric.withAttributes(poolAcquires, { result: pooled === undefined ? "cold" : "warm" }),
              1
            )
            while (pooled === undefined) {
              const launched = yield* restore(awaitLaunched)
              if (isAlive(launched)) pooled = launched
              else yield* Scope.close(launched.scope, Exit.void)
            }
            yield* Queue.offer(wake, undefined)
            return yield* handOver(pooled, request)
          })
        )

      /** A place for one more browser: a warm one gives way, else wait (30 s at most) for a session to end. */
      const makeRoom = Effect.gen(function* () {
        for (let waited = 0; places.count() >= capacity; waited += 100) {
          const spare = yield* takeIdle
          if (spare !== undefined) {
            yield* Scope.close(spare.scope, Exit.void)
            continue
          }
          if (waited >= 30_000) {
            return yield* new Chromium.BrowserLaunchError({
              message: `this node runs its capacity of ${capacity} browsers (MAX_BROWSERS)`
            })
          }
          yield* Effect.sleep("100 millis")
        }
        return yield* places.reserve
      })

      const acquireCold = (request: BrowserRequest & { readonly profileDir: string }) =>
        Effect.uninterruptibleMask((restore) =>
          Effect.gen(function* () {
            yield* Metric.update(Metric.withAttributes(poolAcquires, { result: "cold" }), 1)
            const scope = yield* restore(makeRoom)
            return yield* handOver(yield* restore(launchOwned(scope, request.profileDir)), request)
          })
        )

      const acquire = (request: BrowserRequest) =>
        (request.profileDir === undefined
          ? acquireWarm(request)
          : acquireCold({ ...request, profileDir: request.profileDir })
        ).pipe(Effect.withSpan("BrowserPool.acquire"))

      return BrowserPool.of({
        acquire,
        retire: places.retire,
        idle: Queue.size(idle),
        target: currentTarget,
        capacity,
        ready: Deferred.await(firstLaunch)
      })
    })
  )

  /** Needs `Egress` and `LocalPorts`, which the rest of the service shares. */
  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide(EgressProxies.layerNoDeps),
    Layer.provideMerge(BrowserIsolation.layer)
  )
}
