import { BrowserConfig } from "./BrowserConfig.ts"
import { Clock, Effect, Metric, Scope } from "effect"
import { type EgressListener, EgressProxies } from "../shared/EgressProxy.ts"
import { LocalPorts } from "../../platform/net/LocalPorts.ts"
import * as Chromium from "./Chromium.ts"
import { BrowserIsolation } from "./Isolation.ts"
import { MEMORY_PROFILE_CACHE_BYTES } from "./ProfilesPlace.ts"
import { launchSeconds, poolLaunches } from "./PoolMetrics.ts"
import { recordLaunch } from "../../runtime/PoolSizing.ts"

export const DEFAULT_WIDTH = 1280
export const DEFAULT_HEIGHT = 720

/** A browser started for the pool, with the egress proxy all its traffic goes through. */
export interface Launched {
  readonly browser: Chromium.LaunchedBrowser
  readonly egress: EgressListener
}

const launchError = (error: { readonly message: string }) =>
  new Chromium.BrowserLaunchError({ message: error.message, cause: error })

/**
 * How the pool starts one browser: its own egress proxy listening, its jail
 * (user, cgroup, profile dir), Chromium pointed at the proxy, and its DevTools
 * port fenced off from every page. Each launch's time is kept for the
 * adaptive warm target (`recentLaunches`) and the launch histogram.
 */
export const make = Effect.gen(function* () {
  const config = yield* BrowserConfig
  const proxies = yield* EgressProxies
  const localPorts = yield* LocalPorts
  const isolation = yield* BrowserIsolation
  const options: Omit<Chromium.LaunchOptions, "jail"> = {
    chromePath: config.chromePath,
    profilesDir: isolation.info.profilesDir,
    width: DEFAULT_WIDTH,
    height: DEFAULT_HEIGHT,
    // A profile in memory holds its HTTP cache in memory too, charged to the browser's own limit.
    extraArgs: isolation.info.profilesInMemory
      ? [`--disk-cache-size=${MEMORY_PROFILE_CACHE_BYTES}`]
      : undefined
  }
  const recentLaunches: Array<number> = []
  /** The browser UI's height the last launch measured: the next opens its window that much taller. */
  let frameHint: number | undefined
  /** Two launches in a row measured the same height: later ones take it without measuring. */
  let frameHintSettled = false

  /** Launches into `scope`, which then owns it all: the proxy opens first and closes last. */
  const launch = (
    scope: Scope.Scope,
    profileDir?: string
  ): Effect.Effect<Launched, Chromium.BrowserLaunchError> =>
    Effect.gen(function* () {
      const started = yield* Clock.currentTimeMillis
      const egress = yield* proxies.listen.pipe(Effect.mapError(launchError))
      const jail = yield* isolation.enter(profileDir).pipe(Effect.mapError(launchError))
      const browser = yield* Chromium.launch({
        ...options,
        jail,
        proxyServer: `http://127.0.0.1:${egress.port}`,
        frameHint,
        frameHintSettled
      })
      frameHintSettled = frameHint === browser.frameHeight
      frameHint = browser.frameHeight
      // No page may reach a browser's DevTools port through the egress proxy.
      yield* localPorts.add(Chromium.devToolsPort(browser), "127.0.0.1")
      const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
      recordLaunch(recentLaunches, seconds)
      yield* Metric.update(launchSeconds, seconds)
      yield* Metric.update(poolLaunches, 1)
      return { browser, egress }
    }).pipe(Scope.provide(scope))

  return { launch, recentLaunches, profilesDir: isolation.info.profilesDir }
})
