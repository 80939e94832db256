import * as PageLog from "../shared/PageLog.ts"
import { Deferred, Effect, Exit, Scope } from "effect"
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
    // The session's downloads dir, made, shown by the shared browser's cell for this session alone and
    // told to the context: off the ready path. A download needs it only once one starts, and only a
    // client or an action can start one; a client's connection and an action wait for it. Failed, the
    // session ends (`launch_failed`) and no client reaches its pages.
    const downloads = yield* Deferred.make<void, RuntimeLaunchError>()
    let failed = false
    yield* Effect.gen(function* () {
      yield* Effect.acquireRelease(BrowserDownloads.prepare(downloadsDir, browser.profileDir), () =>
        BrowserDownloads.seal(downloadsDir)
      )
      yield* Effect.all(
        [
          browser.cell
            .show(spec.sessionId)
            .pipe(Effect.mapError(launchError("cannot show the downloads dir to the browser"))),
          control
            .send("Browser.setDownloadBehavior", {
              behavior: "allow",
              downloadPath: downloadsDir,
              browserContextId: contextId
            })
            .pipe(Effect.mapError(launchError("cannot set the downloads dir")))
        ],
        { concurrency: "unbounded", discard: true }
      )
    }).pipe(
      Effect.withSpan("context.downloads"),
      Effect.exit,
      Effect.flatMap((exit) => {
        failed = Exit.isFailure(exit)
        return Deferred.done(downloads, exit)
      }),
      Effect.forkScoped
    )
    // The session's runtime has ended when its browser has, or when its downloads could not be set.
    const exited = yield* Deferred.make<void>()
    // Whatever failed it, a defect (the dir's fs calls) too.
    const downloadsFail = Effect.exit(Deferred.await(downloads)).pipe(
      Effect.flatMap((exit) => (Exit.isFailure(exit) ? Effect.void : Effect.never))
    )
    yield* Effect.raceFirst(Deferred.await(browser.exited), downloadsFail).pipe(
      Effect.andThen(Deferred.succeed(exited, undefined)),
      Effect.forkScoped
    )
    const downloadsFailed = Effect.sync(() => (failed ? ("launch_failed" as const) : undefined))
    const page = pageCapabilities(control, contextId, browser.frameHeight)
    return {
      kind: "browser",
      pid: browser.pid,
      device: describeDevice(browser.product, DEFAULT_WIDTH, DEFAULT_HEIGHT),
      egress,
      exited,
      crashReason: "browser_crashed",
      diedOf: downloadsFailed,
      serve: Effect.void,
      frames: screencast,
      ...page,
      // An action may start a download: it waits for the dir too.
      drive: (action) => Effect.andThen(Deferred.await(downloads).pipe(Effect.orDie), page.drive(action)),
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
        admits: Effect.map(Effect.exit(Deferred.await(downloads)), Exit.isSuccess),
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
