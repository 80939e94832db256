import { Clock, Deferred, Effect, Exit, Metric, Scope, Semaphore } from "effect"
import { ServiceConfig } from "../Config.ts"
import { EgressProxies } from "../egress/EgressProxy.ts"
import * as Screencast from "../liveview/Screencast.ts"
import { Recordings } from "../recordings/Recordings.ts"
import {
  type BrowserRuntime,
  type LaunchSpec,
  RuntimeLaunchError,
  type RuntimePool
} from "../runtime/SessionRuntime.ts"
import * as BrowserContexts from "./BrowserContexts.ts"
import type { Made } from "./BrowserContexts.ts"
import * as BrowserDownloads from "./BrowserDownloads.ts"
import { BrowserPool } from "./BrowserPool.ts"
import * as Cdp from "./CdpClient.ts"
import { describeDevice, type LaunchedBrowser } from "./Chromium.ts"
import { DEFAULT_HEIGHT, DEFAULT_WIDTH } from "./PoolLauncher.ts"
import { groupPss } from "./ProcessMemory.ts"
import { contextAcquires, contextBrowsers, contextBrowsersStarted } from "./PoolMetrics.ts"

/** Contexts kept made ahead in each shared browser, each with its first page and its egress proxy. */
const WARM_PER_BROWSER = 1

/** A browser the context sessions of one account and region share. */
interface Shared {
  readonly key: string
  readonly scope: Scope.Closeable
  readonly browser: LaunchedBrowser
  /** Context sessions open in it now. */
  live: number
  /** Context sessions it has taken (open or ended): it takes no more than `CONTEXT_BROWSER_SESSIONS`. */
  taken: number
  /** Takes no new session (recycled, or gone); closes once its last ends. */
  retiring: boolean
  /** When its last session ended (for the idle close). */
  idleSince: number
  readonly warm: Array<Made>
  making: number
}

const launchError = (message: string) => (cause: unknown) => new RuntimeLaunchError({ message, cause })

/**
 * Context sessions as a session runtime (`isolation: "context"`): a fresh
 * browser context, with its own egress proxy (`proxyServer`), in a Chromium
 * that belongs to one account and region and is shared by its context
 * sessions alone. The shared browser comes from the warm browser pool (it
 * holds one of the node's browser places); a context is kept made ahead in
 * each, so a create is a hand-over, not a launch.
 *
 * Ending a session disposes its context: cookies, storage, cache and service
 * workers go with it. A shared browser takes no new session after
 * `CONTEXT_BROWSER_SESSIONS` or past `CONTEXT_BROWSER_MEMORY_MB` (it closes
 * when its last session ends), holds `CONTEXTS_PER_BROWSER` at once (another
 * is started beyond), and closes `CONTEXT_BROWSER_IDLE_SECONDS` after its
 * last session ended.
 */
export const pool = Effect.gen(function* () {
  const config = yield* ServiceConfig
  const browsers = yield* BrowserPool
  const proxies = yield* EgressProxies
  const recordings = yield* Recordings
  const settings = config.contexts
  const capacity = Math.max(0, settings.max ?? 4 * browsers.capacity)
  const layerScope = yield* Effect.scope
  const shared = new Set<Shared>()
  const lock = yield* Semaphore.make(1)

  const isGone = (host: Shared) => Deferred.isDoneUnsafe(host.browser.exited)

  const closeHost = (host: Shared) =>
    Effect.suspend(() => {
      if (!shared.delete(host)) return Effect.void
      host.retiring = true
      return Metric.update(contextBrowsers, shared.size).pipe(Effect.andThen(browsers.retire(host.scope)))
    })

  /** A context with its first page, made in `host`, in a scope of its own under the host's. */
  const make = (host: Shared) => BrowserContexts.make(host.browser, host.scope, proxies)

  /** Keeps `WARM_PER_BROWSER` made ahead in `host`, in the background. */
  const refill = (host: Shared) =>
    Effect.suspend(() => {
      if (host.retiring || isGone(host) || host.warm.length + host.making >= WARM_PER_BROWSER)
        return Effect.void
      host.making++
      return make(host).pipe(
        Effect.tap((made) =>
          Effect.sync(() => {
            if (host.retiring) return Scope.close(made.scope, Exit.void)
            host.warm.push(made)
          })
        ),
        Effect.catchCause((cause) => Effect.logWarning("context.warm_failed", { cause })),
        Effect.ensuring(Effect.sync(() => host.making--)),
        Effect.forkIn(layerScope),
        Effect.asVoid
      )
    })

  /** Takes a place in `host` (the lock held): its last one retires it. */
  const take = (host: Shared) =>
    Effect.gen(function* () {
      host.live++
      host.taken++
      if (host.taken >= settings.browserSessions) yield* retire(host)
      return host
    })

  /**
   * A shared browser of the account and region with room, or a new one from
   * the warm pool (taken outside the lock: a wait for a browser place holds up
   * no other account's sessions).
   */
  const hostFor = (spec: LaunchSpec) =>
    Effect.gen(function* () {
      const key = `${spec.accountId}\u0000${spec.region.name}`
      const found = yield* lock.withPermits(1)(
        Effect.suspend(() => {
          for (const host of shared) {
            if (host.key !== key || host.retiring || isGone(host) || host.live >= settings.perBrowser)
              continue
            return Effect.asSome(take(host))
          }
          return Effect.succeedNone
        })
      )
      if (found._tag === "Some") return found.value
      const scope = yield* Scope.fork(layerScope)
      const acquired = yield* browsers.acquire({ region: spec.region }).pipe(
        Scope.provide(scope),
        Effect.mapError((error) => new RuntimeLaunchError({ message: error.message, cause: error })),
        Effect.onError(() => Scope.close(scope, Exit.void))
      )
      const host: Shared = {
        key,
        scope,
        browser: acquired.browser,
        live: 0,
        taken: 0,
        retiring: false,
        idleSince: 0,
        warm: [],
        making: 0
      }
      // A browser that dies takes its sessions (their `exited`) and leaves the set.
      yield* Deferred.await(host.browser.exited).pipe(
        Effect.andThen(lock.withPermits(1)(closeHost(host))),
        Effect.forkIn(layerScope)
      )
      yield* Effect.logInfo("context.browser_started", { pid: host.browser.pid })
      return yield* lock.withPermits(1)(
        Effect.gen(function* () {
          shared.add(host)
          yield* Metric.update(contextBrowsers, shared.size)
          yield* Metric.update(contextBrowsersStarted, 1)
          return yield* take(host)
        })
      )
    })

  /** No new session for `host` (recycled); it closes, with any context made ahead, after its last session. */
  const retire = (host: Shared) =>
    Effect.gen(function* () {
      if (host.retiring) return
      host.retiring = true
      yield* Effect.logInfo("context.browser_recycled", { pid: host.browser.pid, taken: host.taken })
    })

  /** A session's context has ended: the browser closes if it is retiring and this was its last. */
  const release = (host: Shared, made: Made) =>
    Scope.close(made.scope, Exit.void).pipe(
      Effect.andThen(
        lock.withPermits(1)(
          Effect.gen(function* () {
            host.live--
            host.idleSince = yield* Clock.currentTimeMillis
            if (groupPss(host.browser.pid) > settings.browserMemoryBytes) yield* retire(host)
            if (host.retiring && host.live === 0) yield* closeHost(host)
            else yield* refill(host)
          })
        )
      )
    )

  // Shared browsers without a session for CONTEXT_BROWSER_IDLE_SECONDS close.
  yield* Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    yield* lock.withPermits(1)(
      Effect.forEach(
        [...shared].filter(
          (host) => host.live === 0 && now - host.idleSince >= settings.browserIdleSeconds * 1000
        ),
        closeHost,
        { discard: true }
      )
    )
  }).pipe(Effect.andThen(Effect.sleep("1 second")), Effect.forever, Effect.forkIn(layerScope))

  const acquire = (spec: LaunchSpec) =>
    Effect.gen(function* () {
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
      const { contextId } = made
      const egress = made.listener.bind(spec.region)
      // The session's own control connection: its screenshots, resizes and live view see its context alone.
      const control = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => Cdp.connect(host.browser.wsEndpoint),
          catch: launchError("cannot connect to the shared browser")
        }),
        (client) => Effect.sync(() => client.close())
      ).pipe(Effect.withSpan("context.control"))
      const screencast = yield* Screencast.make(control, contextId).pipe(
        Effect.withSpan("context.screencast")
      )
      const downloadsDir = BrowserDownloads.dirOf(config.dataDir, spec.sessionId)
      yield* Effect.acquireRelease(BrowserDownloads.prepare(downloadsDir, host.browser.profileDir), () =>
        BrowserDownloads.seal(downloadsDir)
      ).pipe(Effect.withSpan("context.downloadsDir"))
      yield* Effect.tryPromise({
        try: () =>
          control.send("Browser.setDownloadBehavior", {
            behavior: "allow",
            downloadPath: downloadsDir,
            browserContextId: contextId
          }),
        catch: launchError("cannot set the downloads dir")
      }).pipe(Effect.withSpan("context.downloads"))
      // The next one is made once this one is handed over: made meanwhile, it would hold Chromium up.
      yield* refill(host)
      const browser: LaunchedBrowser = { ...host.browser, control }
      return {
        kind: "browser",
        pid: host.browser.pid,
        device: describeDevice(host.browser.product, DEFAULT_WIDTH, DEFAULT_HEIGHT),
        egress,
        proxyPort: made.listener.port,
        exited: host.browser.exited,
        crashReason: "browser_crashed",
        serve: spec.recording
          ? recordings.record({ id: spec.sessionId, accountId: spec.accountId }, screencast)
          : Effect.void,
        resize: (width, height) =>
          Effect.tryPromise(() => Cdp.resize(control, width, height, host.browser.frameHeight, contextId)),
        browser,
        contextId,
        downloadsDir,
        screencast
      } satisfies BrowserRuntime
    }).pipe(Effect.withSpan("ContextRuntime.acquire"))

  return {
    kind: "context",
    acquire,
    retire: (scope) => Effect.asVoid(Effect.forkIn(Scope.close(scope, Exit.void), layerScope)),
    idle: Effect.sync(() => [...shared].reduce((sum, host) => sum + host.warm.length, 0)),
    target: Effect.sync(() => [...shared].filter((host) => !host.retiring).length * WARM_PER_BROWSER),
    capacity,
    ready: Effect.succeed(true)
  } satisfies RuntimePool
})
