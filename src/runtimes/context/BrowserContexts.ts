import * as PageLog from "../shared/PageLog.ts"
import { Effect, Exit, Scope } from "effect"
import WebSocket from "ws"
import { dial, type End } from "../../platform/net/WebSocketEnds.ts"
import type { EgressListener, EgressProxies } from "../shared/EgressProxy.ts"
import type * as Frames from "../../runtime/Frames.ts"
import * as Screencast from "../shared/Screencast.ts"
import { type BrowserRuntime, type LaunchSpec, RuntimeLaunchError } from "../../runtime/SessionRuntime.ts"
import * as BrowserDownloads from "../browser/BrowserDownloads.ts"
import * as CdpGuard from "../browser/CdpGuard.ts"
import { pageCapabilities } from "../browser/PageDriving.ts"
import { selfTest } from "../browser/SelfTest.ts"
import { spliceScoped } from "../../platform/net/Splice.ts"
import * as ContextScope from "./ContextScope.ts"
import * as PageScope from "../browser/PageScope.ts"
import * as Cdp from "../../platform/cdp/CdpClient.ts"
import { describeDevice, type LaunchedBrowser } from "../browser/Chromium.ts"
import { DEFAULT_HEIGHT, DEFAULT_WIDTH } from "../browser/PoolLauncher.ts"

/**
 * A browser context made ahead: its own egress proxy listening (bound to no
 * session yet), one blank page, and the connections its session will use,
 * opened now so that neither the hand-over nor the client's first connect
 * waits on Chromium for a new DevTools connection.
 */
export interface Made {
  readonly contextId: string
  readonly listener: EgressListener
  /** The session's own control connection: its screenshots, resizes and live view see its context alone. */
  readonly control: Cdp.CdpClient
  /** A connection of the context's own (its screencast's, its log's), closed with it. */
  readonly own: Cdp.CdpClient
  readonly screencast: Frames.Screencast
  /** Disposes the context and closes its proxy and connections; a child of its browser's scope. */
  readonly scope: Scope.Closeable
  /** A connection to Chromium for the session's first CDP client, once (`undefined` after, or when it closed). */
  readonly takeUpstream: () => End | undefined
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
      // A loopback port of its own in the browser's cell, leading to its own proxy (free again once
      // the context is disposed and its proxy closed: taken first, it is given back last).
      const port = yield* browser.cell.port
      const listener = yield* proxies
        .listen(browser.cell.egressSocket(port))
        .pipe(Effect.mapError(launchError("cannot open the egress proxy")))
      yield* browser.cell.forward(port).pipe(Effect.mapError(launchError("cannot open the context's port")))
      const control = browser.control
      const { browserContextId } = yield* control
        .send<{ browserContextId: string }>("Target.createBrowserContext", {
          proxyServer: `http://127.0.0.1:${port}`,
          // Loopback too goes through the proxy, as the browser's own switches have it.
          proxyBypassList: "<-loopback>"
        })
        .pipe(Effect.mapError(launchError("cannot create a browser context")))
      // It fails only when the browser has gone, and its contexts with it.
      yield* Scope.addFinalizer(
        scope,
        Effect.ignore(control.send("Target.disposeBrowserContext", { browserContextId }))
      )
      yield* Effect.gen(function* () {
        yield* control.send("Target.createTarget", { url: "about:blank", browserContextId })
        // A new window opens at the launch's --window-size: right already when it allowed for the UI.
        if (!browser.windowsSized)
          yield* Cdp.resize(control, DEFAULT_WIDTH, DEFAULT_HEIGHT, browser.frameHeight, browserContextId)
      }).pipe(Effect.mapError(launchError("cannot open the context's first page")))
      // Closed before the context is disposed (a scope runs its finalizers last first).
      const own = yield* Cdp.connect(browser.wsEndpoint).pipe(
        Effect.mapError(launchError("cannot connect to the shared browser"))
      )
      const screencast = yield* Screencast.make(own, browserContextId)
      let spare: End | undefined = yield* dial(browser.wsEndpoint).pipe(
        Effect.mapError(launchError("cannot connect to the shared browser"))
      )
      const takeUpstream = () => {
        const taken = spare
        spare = undefined
        return taken?.ws.readyState === WebSocket.OPEN ? taken : undefined
      }
      return {
        contextId: browserContextId,
        listener,
        control,
        own,
        screencast,
        scope,
        takeUpstream
      } satisfies Made
    }).pipe(
      Scope.provide(scope),
      Effect.onError(() => Scope.close(scope, Exit.void))
    )
  })

/**
 * Hands `made`, a context of `browser`, to the session of `spec`: its
 * downloads go to the session's own dir (sealed when the caller's scope
 * closes), and the session's runtime is its context, its proxy bound to the
 * session's region, and the connections made with it.
 */
export const handOver = (
  made: Made,
  browser: LaunchedBrowser,
  spec: LaunchSpec,
  dataDir: string
): Effect.Effect<BrowserRuntime, RuntimeLaunchError, Scope.Scope> =>
  Effect.gen(function* () {
    const { contextId, control, screencast } = made
    // The relay's guard counts its refusals against the service's own metrics.
    const services = yield* Effect.context<never>()
    const egress = made.listener.bind(spec.region)
    const downloadsDir = BrowserDownloads.dirOf(dataDir, spec.sessionId)
    const uploadsDir = BrowserDownloads.uploadsDirOf(dataDir, spec.sessionId)
    // Off the ready path; a client's connection and an action wait for it.
    const downloads = yield* BrowserDownloads.setUpAfterReady({
      dir: downloadsDir,
      profileDir: browser.profileDir,
      show: browser.cell.show(spec.sessionId),
      tell: control.send("Browser.setDownloadBehavior", {
        behavior: "allow",
        downloadPath: downloadsDir,
        browserContextId: contextId
      }),
      browserExited: browser.exited
    })
    const page = pageCapabilities(control, contextId, browser.frameHeight)
    return {
      kind: "browser",
      pid: browser.pid,
      device: describeDevice(browser.product, DEFAULT_WIDTH, DEFAULT_HEIGHT),
      egress,
      exited: downloads.exited,
      crashReason: "browser_crashed",
      diedOf: downloads.diedOf,
      serve: Effect.void,
      frames: screencast,
      ...page,
      // An action may start a download: it waits for the dir too.
      drive: (action) =>
        Effect.flatMap(downloads.done, (done) =>
          done ? page.drive(action) : Effect.die(new Error("the session's downloads dir could not be set up"))
        ),
      // Its pages seen come and go on the context's own connection, held by the browser's follower.
      pageLog: PageLog.source({
        targets: made.own,
        pages: browser.control,
        follower: browser.pages,
        contextId,
        egress
      }),
      cdp: {
        endpoint: browser.wsEndpoint,
        takeUpstream: made.takeUpstream,
        // A client's traffic could start a download: it waits for the dir.
        admits: downloads.done,
        // Its clients see a whole browser whose pages are the context's.
        relay: (client, upstream) =>
          spliceScoped(
            client,
            upstream,
            ContextScope.make({ contextId }),
            CdpGuard.make({ downloadsDir, uploadsDir }, services)
          ),
        // A page client's attach and commands pass the context's scope too.
        relayPage: (client, upstream, targetId) =>
          spliceScoped(
            client,
            upstream,
            PageScope.make(targetId, ContextScope.make({ contextId })),
            CdpGuard.make({ downloadsDir, uploadsDir, pageLevel: true }, services)
          ),
        version: Cdp.version(control),
        pages: Cdp.pageTargets(control, contextId)
      },
      uploadsDir: yield* BrowserDownloads.uploadsShown(browser.cell, dataDir, spec.sessionId),
      selfTest: selfTest({ control, contextId, egress })
    } satisfies BrowserRuntime
  })
