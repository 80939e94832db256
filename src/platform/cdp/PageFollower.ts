import { Effect, type Scope } from "effect"
import type { CdpClient, CdpError } from "./CdpClient.ts"

/** A page as the service's connection holds it: its session there, and what the browser said of it. */
export interface FollowedPage {
  /** The page's session on the connection: commands sent there reach the page. */
  readonly sessionId: string
  readonly targetId: string
  readonly url: string
  readonly browserContextId: string | undefined
  readonly openerId: string | undefined
  /** Whether it has not run yet: what the hook sends goes in before its first request and script. */
  readonly paused: boolean
}

/**
 * What is done to each page in its session, synchronously (commands posted in
 * order): it runs once every hook has been called.
 */
export type PageHook = (page: FollowedPage) => void

export interface PageFollower {
  /**
   * Calls `hook` for each page of `contextId` (every page when `undefined`):
   * those open now at once, each one made from now on as it is made, paused
   * until the hook's commands are in. Until the caller's scope closes.
   */
  readonly follow: (contextId: string | undefined, hook: PageHook) => Effect.Effect<void, never, Scope.Scope>
}

interface AttachedToTarget {
  readonly sessionId: string
  readonly waitingForDebugger: boolean
  readonly targetInfo: {
    readonly targetId: string
    readonly type: string
    readonly url: string
    readonly browserContextId?: string
    readonly openerId?: string
  }
}

/**
 * Every page of the browser `control` speaks to, held by `control` from the
 * moment Chromium makes it: the browser's own auto-attach, each new page
 * waiting for the service before it runs (`waitForDebuggerOnStart`), so that
 * what a hook sets (an identity, a log's `Network.enable`) is in place for
 * its first request, a `window.open`'s included. A page found any other way
 * (`Target.targetCreated`, then an attach) has started by then: measured on
 * Chromium 156, a popup's first request was missed one time in three.
 *
 * One follower per connection, made at launch, for the caller's scope: the
 * browser's pages of every context are attached once, and a page no hook is
 * for runs at once. Only pages (the browser's own UI targets, workers and
 * frames are never attached).
 */
export const make = (control: CdpClient): Effect.Effect<PageFollower, CdpError, Scope.Scope> =>
  Effect.gen(function* () {
    const hooks = new Set<{ readonly contextId: string | undefined; readonly hook: PageHook }>()
    const attached = new Map<string, FollowedPage>()

    const call = (hook: PageHook, page: FollowedPage) => {
      try {
        hook(page)
      } catch {
        // A hook's failure is its own: the page runs, and the other hooks are called.
      }
    }
    const fits = (contextId: string | undefined, page: FollowedPage) =>
      contextId === undefined || page.browserContextId === contextId

    const stops = [
      control.on("Target.attachedToTarget", (params: AttachedToTarget, parent) => {
        if (parent !== undefined || params.targetInfo.type !== "page") return
        const info = params.targetInfo
        const page: FollowedPage = {
          sessionId: params.sessionId,
          targetId: info.targetId,
          url: info.url,
          browserContextId: info.browserContextId,
          openerId: info.openerId,
          paused: params.waitingForDebugger
        }
        attached.set(page.sessionId, { ...page, paused: false })
        for (const { contextId, hook } of hooks) if (fits(contextId, page)) call(hook, page)
        // In order, in the page's session: it runs once all the hooks' commands are in.
        if (page.paused) control.post("Runtime.runIfWaitingForDebugger", {}, page.sessionId)
      }),
      control.on("Target.detachedFromTarget", (params: { sessionId: string }) => {
        attached.delete(params.sessionId)
      })
    ]
    yield* Effect.addFinalizer(() => Effect.sync(() => stops.forEach((stop) => stop())))
    yield* control.send("Target.setAutoAttach", {
      autoAttach: true,
      waitForDebuggerOnStart: true,
      flatten: true,
      filter: [{ type: "page" }, { exclude: true }]
    })

    return {
      follow: (contextId, hook) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            const entry = { contextId, hook }
            hooks.add(entry)
            for (const page of attached.values()) if (fits(contextId, page)) call(hook, page)
            return entry
          }),
          (entry) => Effect.sync(() => hooks.delete(entry))
        ).pipe(Effect.asVoid)
    }
  })
