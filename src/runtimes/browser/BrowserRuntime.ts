import { Deferred, Effect } from "effect"
import { NodeConfig } from "../../platform/config/Config.ts"
import * as Screencast from "../shared/Screencast.ts"
import {
  type BrowserRuntime,
  RuntimeLaunchError,
  type LaunchSpec,
  type RuntimePool,
  unavailable
} from "../../runtime/SessionRuntime.ts"
import * as BrowserDownloads from "./BrowserDownloads.ts"
import * as CdpGuard from "./CdpGuard.ts"
import { pageCapabilities } from "./PageDriving.ts"
import { selfTest } from "./SelfTest.ts"
import { splice, spliceScoped } from "../../platform/net/Splice.ts"
import * as PageLog from "../shared/PageLog.ts"
import * as IdentityScope from "./IdentityScope.ts"
import * as PageScope from "./PageScope.ts"
import { BrowserPool } from "./BrowserPool.ts"
import { describeDevice } from "./Chromium.ts"
import * as Cdp from "../../platform/cdp/CdpClient.ts"
import * as Identity from "./Identity.ts"
import { DEFAULT_HEIGHT, DEFAULT_WIDTH } from "./PoolLauncher.ts"

/**
 * Browsers as a session runtime: a Chromium from the warm pool with its
 * egress bound and its screencast (the live view's and the recorder's frames).
 * On a node that runs no browsers (`MAX_BROWSERS=0`, no Chromium), a pool with no places.
 */
export const pool = Effect.gen(function* () {
  const browsers = yield* BrowserPool
  if (!browsers.availability.available) return unavailable("browser", browsers.availability.reason)
  const config = yield* NodeConfig
  // The relay's guard counts its refusals against the service's own metrics.
  const services = yield* Effect.context<never>()

  const acquire = (spec: LaunchSpec) =>
    Effect.gen(function* () {
      // On a workspace: its disk as the profile, on a browser launched for it.
      const profileDir = spec.home?.dir
      const { browser, egress } = yield* browsers
        .acquire({ region: spec.region, profileDir, identity: spec.identity, extensions: spec.extensions })
        .pipe(Effect.mapError((error) => new RuntimeLaunchError({ message: error.message, cause: error })))
      // A workspace's profile is written whole only by a browser that closes itself (its cookie
      // store and storage flush on the way out): asked to, before the kill, 10 s at most.
      if (profileDir !== undefined)
        yield* Effect.addFinalizer(() =>
          // Its answer may never come: the browser closes the connection as it goes.
          Effect.ignore(browser.control.send("Browser.close")).pipe(
            Effect.andThen(Deferred.await(browser.exited)),
            Effect.timeoutOption("10 seconds"),
            Effect.ignore
          )
        )
      // The browser's own: stopped when its scope closes, before the browser is killed.
      const screencast = yield* Screencast.make(browser.control)
      // Downloads go to the session's own dir, kept after the browser (sealed before it is killed).
      const downloadsDir = BrowserDownloads.dirOf(config.dataDir, spec.sessionId)
      // The one dir of the data dir its cell shows the browser, at the same path, and the browser told
      // to download there: off the ready path; a client's connection and an action wait for it.
      const downloads = yield* BrowserDownloads.setUpAfterReady({
        dir: downloadsDir,
        profileDir: browser.profileDir,
        show: browser.cell.show(spec.sessionId),
        tell: browser.control.send("Browser.setDownloadBehavior", {
          behavior: "allow",
          downloadPath: downloadsDir
        }),
        browserExited: browser.exited
      })
      // What its pages say of it beyond what went in at launch: each page set as it is made, and every
      // window at the viewport's size (the first, and the size later ones open at).
      const identity = spec.identity
      const viewport = identity?.viewport
      if (identity !== undefined && Identity.followsPages(identity))
        yield* Identity.followPages(browser.control, browser.pages, identity)
      if (viewport !== undefined)
        yield* Cdp.resize(browser.control, viewport.width, viewport.height, browser.frameHeight).pipe(
          Effect.mapError(
            (cause) => new RuntimeLaunchError({ message: "cannot size the browser's window", cause })
          )
        )
      // The pages a client attaches to keep the user agent's platform and client hints.
      const agent =
        identity?.user_agent === undefined
          ? undefined
          : Identity.userAgentOverride(identity.user_agent, identity.locale)
      const uploadsDir = BrowserDownloads.uploadsDirOf(config.dataDir, spec.sessionId)
      const page = pageCapabilities(browser.control, undefined, browser.frameHeight)
      return {
        kind: "browser",
        pid: browser.pid,
        device: describeDevice(
          browser.product,
          viewport?.width ?? DEFAULT_WIDTH,
          viewport?.height ?? DEFAULT_HEIGHT
        ),
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
            done
              ? page.drive(action)
              : Effect.die(new Error("the session's downloads dir could not be set up"))
          ),
        pageLog: PageLog.source({
          targets: browser.control,
          pages: browser.control,
          follower: browser.pages,
          contextId: undefined,
          egress
        }),
        cdp: {
          endpoint: browser.wsEndpoint,
          // A client's traffic could start a download: it waits for the dir.
          admits: downloads.done,
          relay: (client, upstream) =>
            agent === undefined
              ? splice(client, upstream, CdpGuard.make({ downloadsDir, uploadsDir }, services))
              : spliceScoped(
                  client,
                  upstream,
                  IdentityScope.make(agent),
                  CdpGuard.make({ downloadsDir, uploadsDir }, services)
                ),
          relayPage: (client, upstream, targetId) =>
            spliceScoped(
              client,
              upstream,
              PageScope.make(targetId, agent === undefined ? PageScope.bare : IdentityScope.make(agent)),
              CdpGuard.make({ downloadsDir, uploadsDir, pageLevel: true }, services)
            ),
          version: Cdp.version(browser.control),
          pages: Cdp.pageTargets(browser.control)
        },
        uploadsDir: yield* BrowserDownloads.uploadsShown(browser.cell, config.dataDir, spec.sessionId),
        selfTest: selfTest({ control: browser.control, contextId: undefined, egress })
      } satisfies BrowserRuntime
    })

  return {
    kind: "browser",
    acquire,
    retire: browsers.retire,
    idle: browsers.idle,
    target: browsers.target,
    capacity: browsers.capacity,
    ready: browsers.ready
  } satisfies RuntimePool
})
