import { BrowserConfig } from "./BrowserConfig.ts"
import { Clock, Effect, Metric, Scope } from "effect"
import { type EgressListener, EgressProxies } from "../shared/EgressProxy.ts"
import * as Cell from "./Cell.ts"
import * as Chromium from "./Chromium.ts"
import { BrowserIsolation } from "./Isolation.ts"
import { MEMORY_PROFILE_CACHE_BYTES } from "./ProfilesPlace.ts"
import { launchSeconds, poolLaunches } from "./PoolMetrics.ts"
import { recordLaunch } from "../../runtime/PoolSizing.ts"
import type { BrowserIdentity } from "../../kernel/BrowserIdentity.ts"
import * as Identity from "./Identity.ts"

export const DEFAULT_WIDTH = 1280
export const DEFAULT_HEIGHT = 720

/** What a browser launched for one session (not a warm one) is launched with. */
export interface ColdLaunch {
  /** A profile dir to run on and keep (a workspace's); absent: a fresh one. */
  readonly profileDir?: string | undefined
  /** What its pages say of it (`Identity.launchOf`); absent: the defaults. */
  readonly identity?: BrowserIdentity | undefined
  /** Unpacked extensions it loads, shown read-only in its cell. */
  readonly extensions?: ReadonlyArray<string> | undefined
}

/** A browser started for the pool, with the egress proxy all its traffic goes through. */
export interface Launched {
  readonly browser: Chromium.LaunchedBrowser
  readonly egress: EgressListener
}

const launchError = (error: { readonly message: string }) =>
  new Chromium.BrowserLaunchError({ message: error.message, cause: error })

/**
 * How the pool starts one browser: its jail (cell, user, cgroup, profile
 * dir), its own egress proxy listening where the cell's one way out leads,
 * and Chromium in the cell. Each launch's time is kept for the adaptive warm
 * target (`recentLaunches`) and the launch histogram.
 */
export const make = Effect.gen(function* () {
  const config = yield* BrowserConfig
  const proxies = yield* EgressProxies
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

  /** Launches into `scope`, which then owns it all: the jail first, then its proxy, then Chromium. */
  const launch = (
    scope: Scope.Scope,
    cold?: ColdLaunch
  ): Effect.Effect<Launched, Chromium.BrowserLaunchError> =>
    Effect.gen(function* () {
      const started = yield* Clock.currentTimeMillis
      const extensions = cold?.extensions ?? []
      const entered = yield* isolation.enter(cold?.profileDir, extensions).pipe(Effect.mapError(launchError))
      const egress = yield* proxies
        .listen(Cell.egressSocket(entered.cellDir, Cell.PROXY_PORT))
        .pipe(Effect.mapError(launchError))
      const identity = cold?.identity === undefined ? undefined : Identity.launchOf(cold.identity)
      const jail = identity === undefined ? entered : { ...entered, env: { ...entered.env, ...identity.env } }
      const browser = yield* Chromium.launch({
        ...options,
        jail,
        frameHint,
        // Other switches may frame the page otherwise: measured, and not taken as the pool's.
        frameHintSettled: frameHintSettled && identity === undefined && extensions.length === 0,
        extensions,
        ...(identity === undefined
          ? {}
          : {
              extraArgs: [...(options.extraArgs ?? []), ...identity.args],
              userAgent: identity.userAgent,
              screen: identity.screen
            })
      })
      if (identity === undefined && extensions.length === 0) {
        frameHintSettled = frameHint === browser.frameHeight
        frameHint = browser.frameHeight
      }
      const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
      recordLaunch(recentLaunches, seconds)
      yield* Metric.update(launchSeconds, seconds)
      yield* Metric.update(poolLaunches, 1)
      return { browser, egress }
    }).pipe(Scope.provide(scope))

  return { launch, recentLaunches, profilesDir: isolation.info.profilesDir }
})
