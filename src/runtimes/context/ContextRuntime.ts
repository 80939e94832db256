import { Clock, Deferred, Effect, Exit, Metric, Scope, Semaphore } from "effect"
import { NodeConfig } from "../../platform/config/Config.ts"
import { EgressProxies } from "../shared/EgressProxy.ts"
import {
  type LaunchSpec,
  RuntimeLaunchError,
  type RuntimePool,
  unavailable
} from "../../runtime/SessionRuntime.ts"
import * as BrowserContexts from "./BrowserContexts.ts"
import type { Made } from "./BrowserContexts.ts"
import { BrowserPool } from "../browser/BrowserPool.ts"
import { groupPss } from "../browser/ProcessMemory.ts"
import { contextAcquires, contextBrowsers, contextBrowsersStarted } from "../browser/PoolMetrics.ts"
import * as SharedBrowser from "./SharedBrowser.ts"
import { type Shared, STANDBY_AFTER_MS, WARM_PER_BROWSER } from "./SharedBrowser.ts"
import * as MadeAhead from "./MadeAhead.ts"
import { contextAvailability, ContextConfig } from "./ContextConfig.ts"

/**
 * Context sessions as a session runtime (`isolation: "context"`): a fresh
 * browser context, with its own egress proxy (`proxyServer`), in a Chromium
 * that belongs to one account and region and is shared by its context
 * sessions alone. The shared browser comes from the warm browser pool (it
 * holds one of the node's browser places); a context is kept made ahead in
 * each, so a create is a hand-over, not a launch. An account whose creates
 * come together gets as many made ahead as came together lately
 * (`MadeAhead`), up to `CONTEXT_WARM_MAX`; the extra ones are disposed once
 * its creates slow down.
 *
 * Ending a session disposes its context: cookies, storage, cache and service
 * workers go with it. A shared browser takes no new session after
 * `CONTEXT_BROWSER_SESSIONS` or past `CONTEXT_BROWSER_MEMORY_MB` (it closes
 * when its last session ends), holds `CONTEXTS_PER_BROWSER` at once (another
 * is started beyond), and closes `CONTEXT_BROWSER_IDLE_SECONDS` after its
 * last session ended. On a node that runs none (`MAX_CONTEXTS=0`, or no
 * browsers), a pool with no places.
 */
export const pool = Effect.gen(function* () {
  const config = yield* NodeConfig
  const browsers = yield* BrowserPool
  const proxies = yield* EgressProxies
  const settings = yield* ContextConfig
  const availability = contextAvailability(settings, browsers.availability)
  if (!availability.available) return unavailable("context", availability.reason)
  const capacity = Math.max(0, settings.max ?? 4 * browsers.capacity)
  const layerScope = yield* Effect.scope
  const shared = new Set<Shared>()
  const lock = yield* Semaphore.make(1)

  const closeHost = (host: Shared) =>
    Effect.suspend(() => {
      if (!shared.delete(host)) return Effect.void
      host.retiring = true
      return Metric.update(contextBrowsers, shared.size).pipe(Effect.andThen(browsers.retire(host.scope)))
    })

  /** A context with its first page, made in `host`, in a scope of its own under the host's. */
  const make = (host: Shared) => BrowserContexts.make(host.browser, host.scope, proxies)

  /** Accounts and regions whose standby browser is being started. */
  const starting = new Set<string>()
  /** When each account and region last had a context handed over. */
  const lastHandOver = new Map<string, number>()
  /** When each account and region asked for a context lately (`MadeAhead`). */
  const asks = new Map<string, Array<MadeAhead.Ask>>()
  /** How long making a context takes lately (ms): asks closer than this came together. */
  let makeMs = 50

  /** The contexts `key` wants made ahead now, across its shared browsers. */
  const wanted = (key: string, now: number) =>
    MadeAhead.wanted(asks.get(key) ?? [], now, settings.warmMax, settings.demandWindowMs)

  /** `key`'s shared browsers that take sessions, and the contexts made (or being made) ahead in them. */
  const madeAheadOf = (key: string) => {
    let count = 0
    for (const host of shared) if (host.key === key && !host.retiring) count += host.warm.length + host.making
    return count
  }

  /**
   * Keeps contexts made ahead in `host`, in the background, one at a time
   * (each holds its UI thread): one, and more while its account wants more
   * (`wanted`) and none of its sessions is open. Called with the lock held.
   */
  const refill = (host: Shared): Effect.Effect<void> =>
    Effect.gen(function* () {
      if (host.retiring || SharedBrowser.isGone(host) || host.making > 0) return
      const ahead = host.warm.length + host.making
      // Beyond the first, only while no session runs in it (making one holds up their every CDP
      // call), into a free place, and while its account wants more.
      if (
        ahead >= WARM_PER_BROWSER &&
        (host.live > 0 ||
          ahead >= settings.perBrowser ||
          madeAheadOf(host.key) >= wanted(host.key, yield* Clock.currentTimeMillis))
      )
        return
      host.making++
      const started = yield* Clock.currentTimeMillis
      yield* make(host).pipe(
        Effect.tap((made) =>
          Effect.gen(function* () {
            makeMs = MadeAhead.smooth(makeMs, (yield* Clock.currentTimeMillis) - started)
            if (host.retiring) return yield* Scope.close(made.scope, Exit.void)
            host.warm.push(made)
          })
        ),
        Effect.ensuring(Effect.sync(() => host.making--)),
        // The next one, if its account still wants more (not after a failure: the next session's end tries again).
        Effect.andThen(lock.withPermits(1)(Effect.suspend(() => refill(host)))),
        Effect.catchCause((cause) => Effect.logWarning("context.warm_failed", { cause })),
        Effect.forkIn(layerScope)
      )
    })

  /**
   * Disposes the contexts made ahead beyond what each account wants now (one
   * a shared browser stays), in the background. Called with the lock held.
   */
  const trim = (now: number) =>
    Effect.gen(function* () {
      const keys = new Set([...shared].map((host) => host.key))
      for (const key of keys) {
        let extra = madeAheadOf(key) - wanted(key, now)
        for (const host of shared) {
          while (extra > 0 && host.key === key && !host.retiring && host.warm.length > WARM_PER_BROWSER) {
            const made = host.warm.pop()!
            extra--
            host.disposing++
            yield* Scope.close(made.scope, Exit.void).pipe(
              Effect.ensuring(Effect.sync(() => host.disposing--)),
              Effect.forkIn(layerScope)
            )
          }
        }
      }
    })

  /** Takes a place in `host` (the lock held): its last one retires it. */
  const take = (host: Shared) =>
    Effect.gen(function* () {
      host.live++
      host.taken++
      if (host.taken >= settings.browserSessions) yield* retire(host)
      return host
    })

  const keyOf = (spec: LaunchSpec) => `${spec.accountId}\u0000${spec.region.name}`

  /**
   * A new shared browser for the account and region, from the warm pool
   * (taken outside the lock: a wait for a browser place holds up no other
   * account's sessions), in the set.
   */
  const start = (key: string, spec: Pick<LaunchSpec, "region">) =>
    Effect.gen(function* () {
      const scope = yield* Scope.fork(layerScope)
      const acquired = yield* browsers.acquire({ region: spec.region }).pipe(
        Scope.provide(scope),
        Effect.mapError((error) => new RuntimeLaunchError({ message: error.message, cause: error })),
        Effect.onError(() => Scope.close(scope, Exit.void))
      )
      const host = SharedBrowser.make(key, scope, acquired.browser, yield* Clock.currentTimeMillis)
      // A browser that dies takes its sessions (their `exited`) and leaves the set.
      yield* Deferred.await(host.browser.exited).pipe(
        Effect.andThen(lock.withPermits(1)(closeHost(host))),
        Effect.forkIn(layerScope)
      )
      yield* Effect.logInfo("context.browser_started", { pid: host.browser.pid })
      yield* lock.withPermits(1)(
        Effect.gen(function* () {
          shared.add(host)
          yield* Metric.update(contextBrowsers, shared.size)
          yield* Metric.update(contextBrowsersStarted, 1)
        })
      )
      return host
    })

  /** A shared browser of the account and region with room (`pick`), or a new one; a place in it taken. */
  const hostFor = (spec: LaunchSpec) =>
    Effect.gen(function* () {
      const key = keyOf(spec)
      const found = yield* lock.withPermits(1)(
        Effect.suspend(() => {
          const host = SharedBrowser.pick(shared, key, settings.perBrowser)
          return host === undefined ? Effect.succeedNone : Effect.asSome(take(host))
        })
      )
      if (found._tag === "Some") return found.value
      const host = yield* start(key, spec)
      return yield* lock.withPermits(1)(take(host))
    })

  /**
   * After a hand-over in `host`: the next context is made in another of the
   * account's shared browsers, so that making it never holds up this
   * session's browser; `host` makes its own once this session ends. When the
   * account has no other, and its sessions follow each other (this one
   * within `STANDBY_AFTER_MS` of its last), a standby browser is taken for it
   * from the pool's warm ones (never waiting for a place); otherwise the next
   * is made in `host`.
   */
  const refillElsewhere = (host: Shared, spec: LaunchSpec) =>
    Effect.gen(function* () {
      const key = keyOf(spec)
      const now = yield* Clock.currentTimeMillis
      const previous = lastHandOver.get(key)
      lastHandOver.set(key, now)
      const other = yield* lock.withPermits(1)(
        Effect.sync(() =>
          [...shared].find(
            (candidate) => candidate !== host && SharedBrowser.hasRoom(candidate, key, settings.perBrowser)
          )
        )
      )
      if (other !== undefined) return yield* lock.withPermits(1)(refill(other))
      const followsOn = previous !== undefined && now - previous <= STANDBY_AFTER_MS
      // Only from a browser the pool has warm now: a standby never waits for, or takes, a place a session needs.
      const spare = followsOn && settings.standby && !starting.has(key) ? yield* browsers.idle : 0
      if (spare === 0) return yield* lock.withPermits(1)(refill(host))
      starting.add(key)
      yield* start(key, spec).pipe(
        Effect.tap((standby) => Effect.logInfo("context.standby_started", { pid: standby.browser.pid })),
        Effect.flatMap((standby) => lock.withPermits(1)(refill(standby))),
        Effect.catchCause(() => lock.withPermits(1)(refill(host))),
        Effect.ensuring(Effect.sync(() => starting.delete(key))),
        Effect.forkIn(layerScope)
      )
    })

  /** No new session for `host` (recycled); it closes, with any context made ahead, after its last session. */
  const retire = (host: Shared) =>
    Effect.gen(function* () {
      if (host.retiring) return
      host.retiring = true
      yield* Effect.logInfo("context.browser_recycled", { pid: host.browser.pid, taken: host.taken })
    })

  /**
   * Past `CONTEXT_BROWSER_MEMORY_MB`, `host` takes no new session (it closes
   * once its last ends); read off the session's path, one reading at a time,
   * at most every `MEMORY_CHECK_INTERVAL_MS`.
   */
  const checkMemory = (host: Shared) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      if (!SharedBrowser.memoryDue(host, now)) return
      host.measuring = true
      host.measuredAt = now
      yield* Effect.promise(() => groupPss(host.browser.pid)).pipe(
        Effect.flatMap((pss) =>
          pss <= settings.browserMemoryBytes
            ? Effect.void
            : lock.withPermits(1)(
                Effect.gen(function* () {
                  yield* retire(host)
                  if (host.live === 0) yield* closeHost(host)
                })
              )
        ),
        Effect.ensuring(Effect.sync(() => (host.measuring = false)))
      )
    })

  /** A session's context has ended: the browser closes if it is retiring and this was its last. */
  const release = (host: Shared, made: Made) =>
    Effect.sync(() => host.disposing++).pipe(
      Effect.andThen(Scope.close(made.scope, Exit.void)),
      Effect.ensuring(Effect.sync(() => host.disposing--)),
      Effect.andThen(
        lock.withPermits(1)(
          Effect.gen(function* () {
            host.live--
            host.idleSince = yield* Clock.currentTimeMillis
            if (host.retiring && host.live === 0) yield* closeHost(host)
            else yield* refill(host)
            yield* Effect.forkIn(checkMemory(host), layerScope)
          })
        )
      )
    )

  // Shared browsers without a session for CONTEXT_BROWSER_IDLE_SECONDS close.
  yield* Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    for (const [key, at] of lastHandOver) if (now - at > STANDBY_AFTER_MS) lastHandOver.delete(key)
    for (const [key, asked] of asks) {
      const left = MadeAhead.recent(asked, now, settings.demandWindowMs)
      if (left.length === 0) asks.delete(key)
      else asks.set(key, left)
    }
    yield* lock.withPermits(1)(
      Effect.forEach(
        [...shared].filter(
          (host) => host.live === 0 && now - host.idleSince >= settings.browserIdleSeconds * 1000
        ),
        closeHost,
        { discard: true }
      ).pipe(Effect.andThen(trim(now)))
    )
  }).pipe(Effect.andThen(Effect.sleep("1 second")), Effect.forever, Effect.forkIn(layerScope))

  const acquire = (spec: LaunchSpec) =>
    Effect.gen(function* () {
      const key = keyOf(spec)
      const at = yield* Clock.currentTimeMillis
      asks.set(key, MadeAhead.record(asks.get(key) ?? [], at, makeMs, settings.demandWindowMs))
      const host = yield* hostFor(spec).pipe(Effect.withSpan("context.host"))
      const made = yield* Effect.suspend(() => {
        const warm = host.warm.shift()
        return Metric.update(
          Metric.withAttributes(contextAcquires, { result: warm === undefined ? "cold" : "warm" }),
          1
        ).pipe(Effect.andThen(warm === undefined ? make(host) : Effect.succeed(warm)))
      }).pipe(
        Effect.onError(() => lock.withPermits(1)(Effect.sync(() => host.live--))),
        Effect.withSpan("context.take")
      )
      // Added first, run last: the context goes after its session's screencast, control and downloads.
      yield* Effect.addFinalizer(() => release(host, made))
      const runtime = yield* BrowserContexts.handOver(made, host.browser, spec, config.dataDir)
      // The next one is made once this one is handed over: made meanwhile, it would hold Chromium up.
      yield* refillElsewhere(host, spec)
      return runtime
    }).pipe(Effect.withSpan("ContextRuntime.acquire"))

  return {
    kind: "context",
    acquire,
    // Off the session's path, as a browser's: the context disposed, its proxy closed.
    retire: (scope) =>
      Effect.asVoid(
        Effect.forkIn(Scope.close(scope, Exit.void).pipe(Effect.withSpan("session.teardown")), layerScope)
      ),
    idle: Effect.sync(() => [...shared].reduce((sum, host) => sum + host.warm.length, 0)),
    // What `refill` keeps: one a shared browser, and what its account wants in those with no session open.
    target: Effect.map(Clock.currentTimeMillis, (now) => {
      let total = 0
      for (const key of new Set([...shared].map((host) => host.key))) {
        const hosts = [...shared].filter((host) => host.key === key && !host.retiring)
        const room = hosts.reduce(
          (sum, host) => sum + (host.live > 0 ? WARM_PER_BROWSER : settings.perBrowser),
          0
        )
        total += Math.min(room, Math.max(hosts.length * WARM_PER_BROWSER, wanted(key, now)))
      }
      return total
    }),
    capacity,
    ready: Effect.succeed(true)
  } satisfies RuntimePool
})
