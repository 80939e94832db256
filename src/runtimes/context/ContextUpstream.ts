import {
  type Message,
  OWN_IDS,
  passes,
  sessionOf,
  startsWith,
  TARGET_EVENT_HEAD,
  type TargetInfo,
  text
} from "./ContextRules.ts"
import { type ScopeState, type Send, toClient } from "./ContextState.ts"

/**
 * A `ContextScope`'s Chromium side: what reaches the client of the frames
 * Chromium sends on its connection. A page session's traffic passes unread;
 * target events, browser-level events and the answers the scope reads are
 * parsed, and what is another context's is dropped (a target auto-attach
 * caught is let go). `released` is called once the relay's discovery is
 * answered: the client's frames held till then.
 */
export const makeUpstream = (state: ScopeState, released: () => ReadonlyArray<Send>) => {
  const { targets, sessions, releasing, windows, downloads, pending, pendingKey, own, isOurs } = state

  const release = (sessionId: string, waitingForDebugger: boolean, parent: string | undefined) => {
    releasing.add(sessionId)
    return [
      ...(waitingForDebugger ? [own("Runtime.runIfWaitingForDebugger", {}, sessionId)] : []),
      own("Target.detachFromTarget", { sessionId }, parent)
    ]
  }

  /**
   * A Target event on the connection (`parent` undefined), in a browser-target
   * session (`rootLike`), or in one of the context's page sessions.
   */
  const targetEvent = (
    message: Message,
    frame: string | Buffer,
    parent: string | undefined,
    rootLike: boolean
  ): ReadonlyArray<Send> => {
    const params = message.params ?? {}
    const listed = (info: TargetInfo) =>
      parent === undefined && state.clientFilter !== undefined && passes(state.clientFilter, info.type)
    switch (message.method) {
      case "Target.targetCreated":
      case "Target.targetInfoChanged": {
        const info = params.targetInfo as TargetInfo
        if (info.targetId === state.browserTarget?.targetId) {
          state.browserTarget = info
          return listed(info) ? [{ to: "client", frame }] : []
        }
        if (!isOurs(info)) return []
        targets.set(info.targetId, info)
        return listed(info) ? [{ to: "client", frame }] : []
      }
      case "Target.targetDestroyed":
      case "Target.targetCrashed": {
        const targetId = String(params.targetId)
        const info = targets.get(targetId)
        if (info === undefined) return []
        if (message.method === "Target.targetDestroyed") targets.delete(targetId)
        return listed(info) ? [{ to: "client", frame }] : []
      }
      case "Target.attachedToTarget": {
        const sessionId = String(params.sessionId)
        const info = params.targetInfo as TargetInfo
        // A child of one of the context's page sessions (a frame, a worker) is the context's.
        if ((parent !== undefined && !rootLike) || isOurs(info)) {
          sessions.set(sessionId, { targetId: info.targetId, browser: info.type === "browser" })
          return [{ to: "client", frame }]
        }
        return release(sessionId, params.waitingForDebugger === true, parent)
      }
      case "Target.detachedFromTarget": {
        const sessionId = String(params.sessionId)
        if (releasing.delete(sessionId)) return []
        if (!sessions.delete(sessionId)) return []
        return [{ to: "client", frame }]
      }
      default:
        return parent === undefined || rootLike ? [] : [{ to: "client", frame }]
    }
  }

  const answered = (
    message: Message & { id: number },
    frame: string | Buffer,
    sessionId: string | undefined
  ) => {
    const key = pendingKey(sessionId, message.id)
    const job = pending.get(key)
    pending.delete(key)
    if (job === undefined || message.result === undefined) return [{ to: "client", frame } as Send]
    switch (job._tag) {
      case "Targets": {
        const infos = (message.result.targetInfos as Array<TargetInfo> | undefined) ?? []
        return toClient(
          JSON.stringify({ ...message, result: { ...message.result, targetInfos: infos.filter(isOurs) } })
        )
      }
      case "Window":
        if (typeof message.result.windowId === "number") windows.add(message.result.windowId)
        return [{ to: "client", frame } as Send]
      case "Attach":
        if (typeof message.result.sessionId === "string")
          sessions.set(message.result.sessionId, {
            targetId: job.targetId,
            browser: job.targetId === state.browserTarget?.targetId
          })
        return [{ to: "client", frame } as Send]
    }
  }

  const fromUpstream = (frame: string | Buffer): ReadonlyArray<Send> => {
    const tailSession = sessionOf(frame)
    if (tailSession !== undefined) {
      if (releasing.has(tailSession)) return []
      const session = sessions.get(tailSession)
      if (session === undefined) return []
      // A page session's traffic passes unread but for its Target events and the answers to our own.
      if (!session.browser && !startsWith(frame, TARGET_EVENT_HEAD)) {
        const head = typeof frame === "string" ? frame.slice(0, 24) : frame.toString("latin1", 0, 24)
        const id = /^\{"id":(\d+)/.exec(head)?.[1]
        if (id !== undefined && Number(id) >= OWN_IDS) return []
        // An answer the scope reads (a page session's `Target.getTargets`, its window) is read below.
        if (id === undefined || !pending.has(pendingKey(tailSession, Number(id))))
          return [{ to: "client", frame }]
      }
    }
    let message: Message
    try {
      message = JSON.parse(text(frame)) as Message
    } catch {
      return []
    }
    const sessionId = typeof message.sessionId === "string" ? message.sessionId : undefined
    const session = sessionId === undefined ? undefined : sessions.get(sessionId)
    if (sessionId !== undefined && (releasing.has(sessionId) || session === undefined)) return []
    if (typeof message.id === "number") {
      if (message.id >= OWN_IDS) {
        if (message.id === state.browserTargetId) {
          const info = (message.result?.targetInfo as TargetInfo | undefined) ?? undefined
          if (info !== undefined) state.browserTarget = info
          return []
        }
        if (message.id === state.discoveryId) {
          return released()
        }
        return []
      }
      return answered(message as Message & { id: number }, frame, sessionId)
    }
    if (typeof message.method !== "string") return []
    if (message.method.startsWith("Target."))
      return targetEvent(message, frame, sessionId, session?.browser === true)
    if (sessionId !== undefined) return [{ to: "client", frame }]
    // Browser-level events: downloads begun in the context's frames, the inspector's own.
    const params = message.params ?? {}
    if (message.method === "Browser.downloadWillBegin") {
      if (!isOurs(targets.get(String(params.frameId)))) return []
      downloads.add(String(params.guid))
      return [{ to: "client", frame }]
    }
    if (message.method === "Browser.downloadProgress")
      return downloads.has(String(params.guid)) ? [{ to: "client", frame }] : []
    if (message.method.startsWith("Inspector.")) return [{ to: "client", frame }]
    return []
  }

  return fromUpstream
}
