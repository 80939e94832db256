/**
 * One client's CDP connection to a browser that other sessions share, scoped
 * to its session's browser context: the client sees a whole browser whose
 * only context is its own, and nothing it sends reaches another context.
 *
 * Each client gets a connection of its own to Chromium, so every session
 * Chromium attaches on it was asked for on it. The scope sits on both
 * directions of that connection:
 *
 * - Target discovery is the relay's: it keeps it on (upstream) for the
 *   context's target list, and plays the client's `Target.setDiscoverTargets`
 *   from that list (the targets already there announced as Chromium would).
 * - `Target.getTargets`, target events and `Target.getBrowserContexts` show
 *   only the context's targets, and no context besides the client's default,
 *   which is this one: clients address it as their default context
 *   (puppeteer's `browser.pages()`, playwright's `contexts()[0]`).
 * - Browser-wide auto-attach passes, and a target of another context it
 *   attaches is let go at once (resumed if it waits for a debugger, then
 *   detached) without the client hearing of it.
 * - Commands naming a target, session, window or context check it is the
 *   context's; `Target.createTarget`, `Storage.*Cookies`, download behavior
 *   and permissions without a context act on this one. The same holds for
 *   the browser's own domains in a page's session, where Chromium would
 *   otherwise reach every context (a page-level client's commands are all
 *   in one).
 * - Browser-level commands not listed here (`SystemInfo`, `Tracing`, other
 *   contexts, the browser target itself) are answered with a CDP error.
 *
 * Ids from 2^30 up are the relay's own commands on the connection: a
 * client's command with such an id is refused.
 */

import {
  BROWSER_DOMAINS,
  CONTEXT_METHODS,
  DEFAULT_FILTER,
  error,
  type Message,
  OWN_IDS,
  passes,
  PLAIN_METHODS,
  REFUSED,
  reply,
  TARGET_METHODS,
  type TargetFilter,
  WINDOW_METHODS
} from "./ContextRules.ts"
import type { FrameScope } from "../../platform/net/Splice.ts"
import { announce, makeState, type Send, toClient, toUpstream } from "./ContextState.ts"
import { makeUpstream } from "./ContextUpstream.ts"

export interface ScopeOptions {
  /** The session's browser context. */
  readonly contextId: string
}

export type { Send }

/**
 * A client's connection scoped to its context, as the relay's splice routes it: its own
 * target discovery goes upstream first, the client's commands arrive as `CdpGuard` read them, and
 * Chromium's are those of this client's connection.
 */
export type ContextScope = FrameScope

const idOf = (send: Send) => Number(/"id":(\d+)/.exec(String(send.frame))![1])

export const make = (options: ScopeOptions): ContextScope => {
  const state = makeState(options.contextId)
  const { contextId, targets, sessions, windows, pending, pendingKey, own, ourTarget } = state
  let ready = false
  const waiting: Array<Message> = []

  /**
   * A browser-level command: on the connection itself (`sessionId` undefined), in a browser-target
   * session, or of the browser's own domains in a page's session (`page`: its target, the one a
   * command that names none acts on).
   */
  const browserLevel = (
    message: Message & { id: number; method: string },
    sessionId: string | undefined,
    page?: string
  ) => {
    const { id, method } = message
    const params = message.params ?? {}
    const refuse = (reason: string) => toClient(error(id, reason, sessionId))
    const refused = REFUSED[method]
    if (refused !== undefined) return refuse(`Refused by the service: ${refused}.`)

    if (method === "Target.setDiscoverTargets") {
      if (sessionId !== undefined)
        return refuse("Refused by the service: discover targets on the connection itself, not in a session.")
      const was = state.clientFilter
      state.clientFilter =
        params.discover === true ? ((params.filter as TargetFilter | undefined) ?? DEFAULT_FILTER) : undefined
      const sends: Array<Send> = [{ to: "client", frame: reply(id, { result: {} }) }]
      if (state.clientFilter !== undefined && was === undefined) {
        const known =
          state.browserTarget === undefined
            ? [...targets.values()]
            : [state.browserTarget, ...targets.values()]
        for (const info of known)
          if (passes(state.clientFilter, info.type))
            sends.push(announce("Target.targetCreated", { targetInfo: info }))
      }
      return sends
    }
    if (method === "Target.getBrowserContexts")
      return toClient(reply(id, { result: { browserContextIds: [] } }, sessionId))
    if (method === "Target.getTargets") {
      pending.set(pendingKey(sessionId, id), { _tag: "Targets" })
      return toUpstream(message)
    }
    if (method === "Target.getTargetInfo") {
      // Without a target: the connection's browser target.
      if (params.targetId !== undefined && ourTarget(params.targetId) === undefined)
        return refuse("No target with given id found")
      return toUpstream(message)
    }
    if ((method === "Target.setAutoAttach" || method === "Target.attachToTarget") && params.flatten !== true)
      if (method === "Target.attachToTarget" || params.autoAttach === true)
        return refuse(`Refused by the service: ${REFUSED["Target.sendMessageToTarget"]}.`)
    if (method === "Target.detachFromTarget") {
      const known =
        typeof params.sessionId === "string"
          ? sessions.has(params.sessionId)
          : ourTarget(params.targetId) !== undefined
      return known ? toUpstream(message) : refuse("No session with given id")
    }
    if (TARGET_METHODS.has(method)) {
      const target = ourTarget(params.targetId ?? page)
      if (target === undefined || (target.type === "browser" && method !== "Target.attachToTarget"))
        return refuse("No target with given id found")
      if (method === "Browser.getWindowForTarget") pending.set(pendingKey(sessionId, id), { _tag: "Window" })
      if (method === "Target.attachToTarget")
        pending.set(pendingKey(sessionId, id), { _tag: "Attach", targetId: target.targetId })
      return toUpstream(message)
    }
    if (WINDOW_METHODS.has(method)) {
      if (typeof params.windowId !== "number" || !windows.has(params.windowId))
        return refuse("Browser window not found")
      return toUpstream(message)
    }
    if (CONTEXT_METHODS.has(method)) {
      const named = params.browserContextId
      if (named !== undefined && named !== contextId)
        return refuse("Failed to find browser context with id " + String(named))
      return toUpstream({ ...message, params: { ...params, browserContextId: contextId } })
    }
    if (PLAIN_METHODS.has(method)) return toUpstream(message)
    return refuse(`Refused by the service: ${method} reaches beyond this session's browser context.`)
  }

  // The guard read the frame: what is forwarded is what was checked, written anew, so no duplicate key
  // or odd byte means one thing here and another to Chromium's parser.
  const fromClientNow = (message: Message): ReadonlyArray<Send> => {
    const { id, method, sessionId } = message
    if (typeof id !== "number" || !Number.isInteger(id) || typeof method !== "string")
      return toClient(
        JSON.stringify({
          error: { code: -32600, message: "Message must have integer 'id' and string 'method' properties" }
        })
      )
    if (sessionId !== undefined && (typeof sessionId !== "string" || !sessions.has(sessionId)))
      return toClient(error(id, "Session with given id not found.", undefined, -32001))
    const session = sessionId === undefined ? undefined : sessions.get(sessionId)
    if (id >= OWN_IDS)
      return toClient(
        error(
          id,
          `Refused by the service: command ids from ${OWN_IDS} up are the service's own.`,
          session && sessionId
        )
      )
    if (sessionId === undefined || session!.browser)
      return browserLevel(message as Message & { id: number; method: string }, sessionId)
    // A page's session: Chromium gives it the browser's own domains whole (every context's targets,
    // attaching to and closing them, new pages in the default context, every window), so their
    // commands there are held to the browser level's rules. The rest is the page's; a context named
    // in it must be this one.
    if (BROWSER_DOMAINS.has(method.slice(0, method.indexOf("."))))
      return browserLevel(message as Message & { id: number; method: string }, sessionId, session!.targetId)
    const refused = REFUSED[method]
    if (refused !== undefined) return toClient(error(id, `Refused by the service: ${refused}.`, sessionId))
    const named = message.params?.browserContextId
    if (named !== undefined && named !== contextId)
      return toClient(error(id, "Failed to find browser context with id " + String(named), sessionId))
    return toUpstream(message)
  }

  return {
    open: () => {
      // The connection's browser target first (its answer comes before discovery's), then discovery.
      const browser = own("Target.getTargetInfo")
      const discovery = own("Target.setDiscoverTargets", { discover: true, filter: [{}] })
      state.browserTargetId = idOf(browser)
      state.discoveryId = idOf(discovery)
      return [browser, discovery]
    },
    fromClient: (command) => {
      if (!ready) {
        waiting.push(command)
        return []
      }
      return fromClientNow(command)
    },
    fromUpstream: makeUpstream(state, () => {
      ready = true
      return waiting.splice(0).flatMap(fromClientNow)
    })
  }
}
