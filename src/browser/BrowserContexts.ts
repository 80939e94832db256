import { Effect, Exit, Scope } from "effect"
import type { EgressListener, EgressProxies } from "../egress/EgressProxy.ts"
import { RuntimeLaunchError } from "../runtime/SessionRuntime.ts"
import * as Cdp from "./CdpClient.ts"
import type { LaunchedBrowser } from "./Chromium.ts"
import { DEFAULT_HEIGHT, DEFAULT_WIDTH } from "./PoolLauncher.ts"

/** A browser context made ahead: its own egress proxy listening (bound to no session yet), one blank page. */
export interface Made {
  readonly contextId: string
  readonly listener: EgressListener
  /** Disposes the context and closes its proxy; a child of its browser's scope. */
  readonly scope: Scope.Closeable
}

const launchError = (message: string) => (cause: unknown) => new RuntimeLaunchError({ message, cause })

/**
 * A browser context in `browser` with its own egress proxy (listening,
 * bound to no session yet) as its `proxyServer`, and, like a launched
 * Chromium, one blank page sized as the pool's browsers are. Its scope, a
 * child of `parent`, disposes the context and closes the proxy.
 */
export const make = (
  browser: LaunchedBrowser,
  parent: Scope.Scope,
  proxies: typeof EgressProxies.Service
): Effect.Effect<Made, RuntimeLaunchError> =>
  Effect.gen(function* () {
    const scope = yield* Scope.fork(parent)
    return yield* Effect.gen(function* () {
      const listener = yield* proxies.listen.pipe(
        Effect.mapError(launchError("cannot open the egress proxy"))
      )
      const control = browser.control
      const { browserContextId } = yield* Effect.tryPromise({
        try: () =>
          control.send<{ browserContextId: string }>("Target.createBrowserContext", {
            proxyServer: `http://127.0.0.1:${listener.port}`,
            // Loopback too goes through the proxy, as the browser's own switches have it.
            proxyBypassList: "<-loopback>"
          }),
        catch: launchError("cannot create a browser context")
      })
      yield* Scope.addFinalizer(
        scope,
        Effect.promise(() =>
          control.send("Target.disposeBrowserContext", { browserContextId }).catch(() => undefined)
        )
      )
      yield* Effect.tryPromise({
        try: async () => {
          await control.send("Target.createTarget", { url: "about:blank", browserContextId })
          await Cdp.resize(control, DEFAULT_WIDTH, DEFAULT_HEIGHT, browser.frameHeight, browserContextId)
        },
        catch: launchError("cannot open the context's first page")
      })
      return { contextId: browserContextId, listener, scope } satisfies Made
    }).pipe(
      Scope.provide(scope),
      Effect.onError(() => Scope.close(scope, Exit.void))
    )
  })
