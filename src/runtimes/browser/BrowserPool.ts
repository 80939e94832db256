import { BrowserConfig, type BrowserSettings } from "./BrowserConfig.ts"
import { Context, Deferred, Effect, Layer, type Scope } from "effect"
import * as FsSync from "node:fs"
import * as Os from "node:os"
import { EgressProxies } from "../shared/EgressProxy.ts"
import type { EgressTap } from "../../runtime/EgressTap.ts"
import type { EgressRegion } from "../../platform/net/Regions.ts"
import * as Cell from "./Cell.ts"
import * as Chromium from "./Chromium.ts"
import { BrowserIsolation } from "./Isolation.ts"
import * as PoolLauncher from "./PoolLauncher.ts"
import { browsersLive, poolAcquires, poolIdle, poolTarget } from "./PoolMetrics.ts"
import { defaultCapacity } from "../../runtime/PoolSizing.ts"
import { type Availability, AVAILABLE, notAvailable } from "../../runtime/SessionRuntime.ts"
import * as WarmPool from "../../runtime/WarmPool.ts"
import { type BrowserIdentity, needsOwnLaunch } from "../../kernel/BrowserIdentity.ts"

/**
 * Whether this node runs browsers: `MAX_BROWSERS` is not 0, there is a
 * Chromium at `CHROME_PATH`, and the cell's helper is built. Reads the disk,
 * changes nothing (`rbs doctor` asks it too).
 */
export const browserAvailability = (config: BrowserSettings): Availability => {
  if (config.maxBrowsers !== undefined && config.maxBrowsers <= 0)
    return notAvailable("MAX_BROWSERS is 0: set it above 0, or unset it, to run browsers")
  const missing = Chromium.notFoundAt(config.chromePath)
  if (missing !== undefined) return notAvailable(missing)
  // A browser runs in its cell or not at all.
  if (!FsSync.existsSync(Cell.CELL_EXEC))
    return notAvailable(
      `browsers run in a cell of their own, and its helper is not built (${Cell.CELL_EXEC}): install gcc and run the set-up again (npm start)`
    )
  const refused = Cell.refusal(config.inContainer)
  if (refused !== undefined)
    return notAvailable(
      `browsers run in a cell of their own, and this machine refuses to make one (${refused})`
    )
  return AVAILABLE
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
  /**
   * What its pages say of it. Beyond a viewport's size (which any browser
   * takes by a resize) it takes the cold path too: it goes in at launch.
   */
  readonly identity?: BrowserIdentity | undefined
  /** Unpacked extensions it loads: a launch of its own too. */
  readonly extensions?: ReadonlyArray<string> | undefined
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
    /** `MAX_BROWSERS`: this node never runs more browsers than this; 0 when it runs none. */
    readonly capacity: number
    /** Whether this node runs browsers at all (`browserAvailability`), found at start. */
    readonly availability: Availability
    /** Completes once the pool has launched its first browser (or failed to). */
    readonly ready: Effect.Effect<boolean>
  }
>()("rbs/browser/BrowserPool") {
  static readonly layerNoDeps = Layer.effect(
    BrowserPool,
    Effect.gen(function* () {
      const config = yield* BrowserConfig
      const availability = browserAvailability(config)
      const launcher = yield* PoolLauncher.make
      // Browsers of a process that died without cleaning up.
      yield* Chromium.reapOrphans(launcher.profilesDir)
      const pool = yield* WarmPool.make({
        noun: "browser",
        capacitySetting: "MAX_BROWSERS",
        // A node that runs no browsers has no place for one: the pool launches none.
        capacity: availability.available
          ? Math.max(1, config.maxBrowsers ?? defaultCapacity(Os.totalmem(), Os.availableParallelism()))
          : 0,
        floor: Math.max(0, config.browserPoolSize),
        // Two launches a core at a time: a launch waits on the disk and on process start-up as much as
        // on the CPU, and one a core let creates queue behind slow launches under load (open-loop bench).
        maxParallelLaunches: Math.max(4, 2 * Os.availableParallelism()),
        launch: (scope: Scope.Scope, cold?: PoolLauncher.ColdLaunch) => launcher.launch(scope, cold),
        isAlive: (launched) => !Deferred.isDoneUnsafe(launched.browser.exited),
        recentLaunches: launcher.recentLaunches,
        metrics: { idle: poolIdle, target: poolTarget, live: browsersLive, acquires: poolAcquires },
        failure: (message) => new Chromium.BrowserLaunchError({ message })
      })

      // The egress proxy is bound to the session's region at hand-over: an idle browser's refuses all.
      const acquire = (request: BrowserRequest) =>
        pool
          .acquire(
            request.profileDir === undefined &&
              (request.identity === undefined || !needsOwnLaunch(request.identity)) &&
              (request.extensions === undefined || request.extensions.length === 0)
              ? undefined
              : { profileDir: request.profileDir, identity: request.identity, extensions: request.extensions }
          )
          .pipe(
            Effect.map((launched): AcquiredBrowser => ({
              browser: launched.browser,
              egress: launched.egress.bind(request.region)
            })),
            Effect.withSpan("BrowserPool.acquire")
          )

      return BrowserPool.of({
        acquire,
        retire: pool.retire,
        idle: pool.idle,
        target: pool.target,
        capacity: pool.capacity,
        ready: pool.ready,
        availability
      })
    })
  )

  /** Needs `Egress` (and the `LocalPorts` it reads), which the rest of the service shares. */
  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide(EgressProxies.layerNoDeps),
    Layer.provideMerge(BrowserIsolation.layer)
  )
}
