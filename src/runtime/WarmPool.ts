import { Clock, Deferred, Effect, Exit, Metric, Option, Queue, Scope } from "effect"
import * as PoolPlaces from "./PoolPlaces.ts"
import { demandRate, launchEstimate, pruneArrivals, warmTarget } from "./PoolSizing.ts"

/** A pool's gauges and counters in `/metrics`. */
export interface PoolMetrics {
  readonly idle: Metric.Gauge<number>
  readonly target: Metric.Gauge<number>
  readonly live: Metric.Gauge<number>
  readonly acquires: Metric.Counter<number>
}

export interface WarmPoolOptions<L, C, E> {
  /** What the pool holds ("browser", "sandbox"), for messages. */
  readonly noun: string
  /** The capacity's setting, for messages (`MAX_BROWSERS`). */
  readonly capacitySetting: string
  /** This node never runs more than this many, warm, in use or being torn down. */
  readonly capacity: number
  /** Warm ones kept whatever the demand. */
  readonly floor: number
  readonly maxParallelLaunches: number
  /** Launches one into `scope` (which then owns it); `cold`: a launch for one request, never pooled. */
  readonly launch: (scope: Scope.Scope, cold?: C) => Effect.Effect<L, E>
  /** False once a warm one died while it waited. */
  readonly isAlive: (launched: L) => boolean
  /** Recent launch times in seconds (the adaptive target's estimate). */
  readonly recentLaunches: ReadonlyArray<number>
  readonly metrics: PoolMetrics
  /** The error of a launch that did not come within 30 seconds, or of a node at capacity. */
  readonly failure: (message: string) => E
}

/**
 * A warm pool of launched things (browsers, sandboxes): kept ready so a
 * session starts on one already running. Every one holds a place of the
 * node's capacity from before its launch starts until it is torn down. The
 * target adapts to demand (`PoolSizing`): twice the creates that arrive
 * during a launch, never below the floor, never beyond what the node can
 * still place. Launches run a few at a time; an acquire that finds none
 * warm waits for the next (30 s at most); one that needs its own launch (a
 * kept profile, another image) makes room first, a warm one giving way.
 */
export const make = <L, C, E>(options: WarmPoolOptions<L, C, E>) =>
  Effect.gen(function* () {
    const { capacity, floor, metrics } = options
    const idle = yield* Queue.unbounded<{ readonly launched: L; readonly scope: Scope.Closeable }>()
    const wake = yield* Queue.sliding<void>(1)
    const firstLaunch = yield* Deferred.make<boolean>()
    const places = yield* PoolPlaces.make(() => Queue.offer(wake, undefined))

    type Pooled = { readonly launched: L; readonly scope: Scope.Closeable }

    const launchOwned = (scope: Scope.Closeable, cold?: C) =>
      options.launch(scope, cold).pipe(
        Effect.tap(() => Deferred.succeed(firstLaunch, true)),
        Effect.onError(() => Scope.close(scope, Exit.void)),
        Effect.map((launched): Pooled => ({ launched, scope }))
      )

    const isAlive = (pooled: Pooled) => options.isAlive(pooled.launched)

    let launching = 0
    let waiting = 0
    let lastError: E | undefined
    const arrivals: Array<number> = []
    let lastAcquire = 0

    const launchOne = (scope: Scope.Closeable) =>
      launchOwned(scope).pipe(
        Effect.flatMap((pooled) => Queue.offer(idle, pooled)),
        Effect.tap(() => Effect.sync(() => (lastError = undefined))),
        Effect.tapError((error) =>
          Effect.sync(() => (lastError = error)).pipe(
            Effect.andThen(Effect.logError(`${options.noun}.pool.launch_failed`, { error })),
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
        launchSeconds: launchEstimate(options.recentLaunches),
        floor,
        capacity,
        busy: places.count() - idleNow - launching
      })
    })

    const refill = Effect.gen(function* () {
      const target = yield* currentTarget
      yield* Metric.update(metrics.target, target)
      yield* Metric.update(metrics.live, places.count())
      yield* Metric.update(metrics.idle, yield* Queue.size(idle))
      // Never one that cannot be placed: the node's capacity counts every one it has.
      while (
        (yield* Queue.size(idle)) + launching < target + waiting &&
        launching < options.maxParallelLaunches &&
        places.count() < capacity
      ) {
        launching++
        yield* Effect.forkScoped(launchOne(yield* places.reserve))
      }
      // Demand fell: after a quiet half minute, warm ones beyond the target go.
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
                Effect.fail(lastError ?? options.failure(`no ${options.noun} launched within 30 seconds`))
            })
          )
        ),
      () => Effect.sync(() => waiting--)
    )

    /** Into the caller's scope, which then owns its teardown. */
    const handOver = (pooled: Pooled) =>
      Effect.gen(function* () {
        const caller = yield* Scope.Scope
        yield* Scope.addFinalizer(caller, Scope.close(pooled.scope, Exit.void))
        return pooled.launched
      })

    // Only the hand-over is uninterruptible: one is either still the pool's or
    // already in the caller's scope, never in between.
    const acquireWarm = Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        arrivals.push(now)
        lastAcquire = now
        let pooled = yield* takeIdle
        yield* Metric.update(
          Metric.withAttributes(metrics.acquires, { result: pooled === undefined ? "cold" : "warm" }),
          1
        )
        while (pooled === undefined) {
          const launched = yield* restore(awaitLaunched)
          if (isAlive(launched)) pooled = launched
          else yield* Scope.close(launched.scope, Exit.void)
        }
        yield* Queue.offer(wake, undefined)
        return yield* handOver(pooled)
      })
    )

    /** A place for one more: a warm one gives way, else wait (30 s at most) for a session to end. */
    const makeRoom = Effect.gen(function* () {
      for (let waited = 0; places.count() >= capacity; waited += 100) {
        const spare = yield* takeIdle
        if (spare !== undefined) {
          yield* Scope.close(spare.scope, Exit.void)
          continue
        }
        if (waited >= 30_000) {
          return yield* Effect.fail(
            options.failure(`this node runs its capacity of ${capacity} (${options.capacitySetting})`)
          )
        }
        yield* Effect.sleep("100 millis")
      }
      return yield* places.reserve
    })

    const acquireCold = (cold: C) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          yield* Metric.update(Metric.withAttributes(metrics.acquires, { result: "cold" }), 1)
          const scope = yield* restore(makeRoom)
          return yield* handOver(yield* restore(launchOwned(scope, cold)))
        })
      )

    return {
      /** A warm one, or (with `cold`) one launched for this request alone. */
      acquire: (cold?: C): Effect.Effect<L, E, Scope.Scope> =>
        cold === undefined ? acquireWarm : acquireCold(cold),
      retire: places.retire,
      idle: Queue.size(idle),
      target: currentTarget,
      capacity,
      ready: Deferred.await(firstLaunch)
    }
  })
