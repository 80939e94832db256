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
 *   and permissions without a context act on this one.
 * - Browser-level commands not listed here (`SystemInfo`, `Tracing`, other
 *   contexts, the browser target itself) are answered with a CDP error.
 *
 * Ids from 2^30 up are the relay's own commands on the connection: a
 * client's command with such an id is refused.
 */

export interface ScopeOptions {
  /** The session's browser context. */
  readonly contextId: string
}

/** Where a frame goes. */
export interface Send {
  readonly to: "upstream" | "client"
  readonly frame: string | Buffer
}

export interface ContextScope {
  /** What the relay sends upstream before anything of the client's: its own target discovery. */
  readonly open: () => ReadonlyArray<Send>
  /** A frame from the client (already past `CdpGuard`). */
  readonly fromClient: (frame: string | Buffer) => ReadonlyArray<Send>
  /** A frame from Chromium, on this client's connection. */
  readonly fromUpstream: (frame: string | Buffer) => ReadonlyArray<Send>
}

/** The first of the relay's own command ids. */
export const OWN_IDS = 2 ** 30
const OWN_IDS_END = 2 ** 31 - 1

interface TargetInfo {
  readonly targetId: string
  readonly type: string
  readonly browserContextId?: string
  readonly [key: string]: unknown
}

interface Message {
  readonly id?: unknown
  readonly method?: unknown
  readonly params?: Record<string, unknown>
  readonly sessionId?: unknown
  readonly result?: Record<string, unknown>
  readonly error?: unknown
}

type TargetFilter = ReadonlyArray<{ readonly type?: string; readonly exclude?: boolean }>

/** Chromium's filter when none is given: everything but the browser and tabs. */
const DEFAULT_FILTER: TargetFilter = [{ type: "browser", exclude: true }, { type: "tab", exclude: true }, {}]

/** The first entry that matches decides; none matching excludes. */
const passes = (filter: TargetFilter, type: string) => {
  for (const entry of filter) {
    if (entry.type === undefined || entry.type === type) return entry.exclude !== true
  }
  return false
}

/** What a pending command of the client's needs done to its response. */
type Pending =
  | { readonly _tag: "Targets" }
  | { readonly _tag: "Window" }
  | { readonly _tag: "Attach"; readonly targetId: string }

/** Browser-level methods that name their context in `browserContextId`: absent means this one. */
const CONTEXT_METHODS = new Set([
  "Target.createTarget",
  "Browser.setDownloadBehavior",
  "Browser.cancelDownload",
  "Browser.grantPermissions",
  "Browser.resetPermissions",
  "Browser.setPermission",
  "Storage.getCookies",
  "Storage.setCookies",
  "Storage.clearCookies"
])

/** Browser-level methods naming one target in `targetId`, which must be the context's. */
const TARGET_METHODS = new Set([
  "Target.attachToTarget",
  "Target.activateTarget",
  "Target.closeTarget",
  "Target.autoAttachRelated",
  "Browser.getWindowForTarget"
])

/** Browser-level methods naming a window of the context's (one `Browser.getWindowForTarget` answered). */
const WINDOW_METHODS = new Set([
  "Browser.getWindowBounds",
  "Browser.setWindowBounds",
  "Browser.setContentsSize"
])

/** Browser-level methods that pass as they are. */
const PLAIN_METHODS = new Set(["Browser.getVersion", "Target.setAutoAttach"])

const REFUSED: Record<string, string> = {
  "Target.attachToBrowserTarget": "the browser target reaches every session's context",
  "Target.createBrowserContext":
    "a context session is one browser context (create another session for another)",
  "Target.disposeBrowserContext": "a session's context ends with the session (DELETE /v1/sessions/{id})",
  "Target.sendMessageToTarget": "only flattened sessions are supported (flatten: true)"
}

/** A reply to the client, in the session the command came in (`undefined`: the connection's own). */
const reply = (id: unknown, body: object, sessionId?: string) =>
  JSON.stringify(sessionId === undefined ? { id, ...body } : { id, ...body, sessionId })

const error = (id: unknown, message: string, sessionId?: string, code = -32000) =>
  reply(id, { error: { code, message } }, sessionId)

const text = (frame: string | Buffer) => (typeof frame === "string" ? frame : frame.toString("utf8"))

/** `"sessionId":"..."}` at the end of a frame, where Chromium puts it. */
const TAIL_SESSION = /"sessionId":"([^"\\]+)"\}\s*$/

const sessionOf = (frame: string | Buffer): string | undefined => {
  const tail =
    typeof frame === "string" ? frame.slice(-160) : frame.toString("latin1", Math.max(0, frame.length - 160))
  return TAIL_SESSION.exec(tail)?.[1]
}

/** Chromium writes an event's method first: `{"method":"Target.` announces one the scope reads. */
const TARGET_EVENT_HEAD = '{"method":"Target.'
const startsWith = (frame: string | Buffer, head: string) =>
  typeof frame === "string" ? frame.startsWith(head) : frame.toString("latin1", 0, head.length) === head

/** A session attached on this connection: to one of the context's targets, or to the connection's browser target. */
interface Attached {
  readonly targetId: string
  /** A browser-target session: its commands are browser-level, and get the same checks. */
  readonly browser: boolean
}

export const make = (options: ScopeOptions): ContextScope => {
  const { contextId } = options
  /** The context's targets, all types, as discovery last described them. */
  const targets = new Map<string, TargetInfo>()
  /** This connection's own browser target (each connection to the browser endpoint has one). */
  let browserTarget: TargetInfo | undefined
  /** Sessions attached on this connection to the context's targets (and their children). */
  const sessions = new Map<string, Attached>()
  /** Sessions of other contexts' targets being let go: nothing of theirs reaches the client. */
  const releasing = new Set<string>()
  /** Windows of the context's targets, as `Browser.getWindowForTarget` answered. */
  const windows = new Set<number>()
  /** Downloads begun in the context's frames. */
  const downloads = new Set<string>()
  /** The client's commands whose answers the scope reads, by session and id. */
  const pending = new Map<string, Pending>()
  const pendingKey = (sessionId: string | undefined, id: number) => `${sessionId ?? ""}#${id}`
  let clientFilter: TargetFilter | undefined
  let nextOwnId = OWN_IDS
  let browserTargetId: number | undefined
  let discoveryId: number | undefined
  let ready = false
  const waiting: Array<string | Buffer> = []

  const own = (method: string, params?: object, sessionId?: string): Send => {
    const id = nextOwnId
    nextOwnId = nextOwnId + 1 >= OWN_IDS_END ? OWN_IDS : nextOwnId + 1
    return {
      to: "upstream",
      frame: JSON.stringify(
        sessionId === undefined
          ? { id, method, ...(params && { params }) }
          : { id, method, params, sessionId }
      )
    }
  }
  const idOf = (send: Send) => Number(/"id":(\d+)/.exec(String(send.frame))![1])

  const isOurs = (info: TargetInfo | undefined) =>
    info !== undefined &&
    (info.browserContextId === contextId ||
      (info.type === "browser" && info.targetId === browserTarget?.targetId))
  const ourTarget = (targetId: unknown) =>
    typeof targetId === "string"
      ? targetId === browserTarget?.targetId
        ? browserTarget
        : isOurs(targets.get(targetId))
          ? targets.get(targetId)
          : undefined
      : undefined

  const announce = (method: string, params: object): Send => ({
    to: "client",
    frame: JSON.stringify({ method, params })
  })

  // ---- from the client

  const toClient = (frame: string): ReadonlyArray<Send> => [{ to: "client", frame }]
  const upstream = (message: object): ReadonlyArray<Send> => [
    { to: "upstream", frame: JSON.stringify(message) }
  ]

  /** A browser-level command: on the connection itself (`sessionId` undefined) or in a browser-target session. */
  const browserLevel = (message: Message & { id: number; method: string }, sessionId: string | undefined) => {
    const { id, method } = message
    const params = message.params ?? {}
    const refuse = (reason: string) => toClient(error(id, reason, sessionId))
    const refused = REFUSED[method]
    if (refused !== undefined) return refuse(`Refused by the service: ${refused}.`)

    if (method === "Target.setDiscoverTargets") {
      if (sessionId !== undefined)
        return refuse("Refused by the service: discover targets on the connection itself, not in a session.")
      const was = clientFilter
      clientFilter =
        params.discover === true ? ((params.filter as TargetFilter | undefined) ?? DEFAULT_FILTER) : undefined
      const sends: Array<Send> = [{ to: "client", frame: reply(id, { result: {} }) }]
      if (clientFilter !== undefined && was === undefined) {
        const known =
          browserTarget === undefined ? [...targets.values()] : [browserTarget, ...targets.values()]
        for (const info of known)
          if (passes(clientFilter, info.type))
            sends.push(announce("Target.targetCreated", { targetInfo: info }))
      }
      return sends
    }
    if (method === "Target.getBrowserContexts")
      return toClient(reply(id, { result: { browserContextIds: [] } }, sessionId))
    if (method === "Target.getTargets") {
      pending.set(pendingKey(sessionId, id), { _tag: "Targets" })
      return upstream(message)
    }
    if (method === "Target.getTargetInfo") {
      // Without a target: the connection's browser target.
      if (params.targetId !== undefined && ourTarget(params.targetId) === undefined)
        return refuse("No target with given id found")
      return upstream(message)
    }
    if ((method === "Target.setAutoAttach" || method === "Target.attachToTarget") && params.flatten !== true)
      if (method === "Target.attachToTarget" || params.autoAttach === true)
        return refuse(`Refused by the service: ${REFUSED["Target.sendMessageToTarget"]}.`)
    if (method === "Target.detachFromTarget") {
      const known =
        typeof params.sessionId === "string"
          ? sessions.has(params.sessionId)
          : ourTarget(params.targetId) !== undefined
      return known ? upstream(message) : refuse("No session with given id")
    }
    if (TARGET_METHODS.has(method)) {
      const target = ourTarget(params.targetId)
      if (target === undefined || (target.type === "browser" && method !== "Target.attachToTarget"))
        return refuse("No target with given id found")
      if (method === "Browser.getWindowForTarget") pending.set(pendingKey(sessionId, id), { _tag: "Window" })
      if (method === "Target.attachToTarget")
        pending.set(pendingKey(sessionId, id), { _tag: "Attach", targetId: target.targetId })
      return upstream(message)
    }
    if (WINDOW_METHODS.has(method)) {
      if (typeof params.windowId !== "number" || !windows.has(params.windowId))
        return refuse("Browser window not found")
      return upstream(message)
    }
    if (CONTEXT_METHODS.has(method)) {
      const named = params.browserContextId
      if (named !== undefined && named !== contextId)
        return refuse("Failed to find browser context with id " + String(named))
      return upstream({ ...message, params: { ...params, browserContextId: contextId } })
    }
    if (PLAIN_METHODS.has(method)) return upstream(message)
    return refuse(`Refused by the service: ${method} reaches beyond this session's browser context.`)
  }

  const fromClientNow = (frame: string | Buffer): ReadonlyArray<Send> => {
    let message: Message
    try {
      message = JSON.parse(text(frame)) as Message
    } catch {
      message = undefined as unknown as Message
    }
    // What is forwarded is what was checked, written anew: no duplicate key or odd byte means one
    // thing here and another to Chromium's parser.
    if (typeof message !== "object" || message === null || Array.isArray(message))
      return toClient(JSON.stringify({ error: { code: -32700, message: "Message must be a valid JSON" } }))
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
    // A page's session: Chromium allows it its own auto-attach and little else of Target; a context
    // named in it must be this one.
    const refused = REFUSED[method]
    if (refused !== undefined) return toClient(error(id, `Refused by the service: ${refused}.`, sessionId))
    const named = message.params?.browserContextId
    if (named !== undefined && named !== contextId)
      return toClient(error(id, "Failed to find browser context with id " + String(named), sessionId))
    return upstream(message)
  }

  // ---- from Chromium

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
      parent === undefined && clientFilter !== undefined && passes(clientFilter, info.type)
    switch (message.method) {
      case "Target.targetCreated":
      case "Target.targetInfoChanged": {
        const info = params.targetInfo as TargetInfo
        if (info.targetId === browserTarget?.targetId) {
          browserTarget = info
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
            browser: job.targetId === browserTarget?.targetId
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
        if (message.id === browserTargetId) {
          const info = (message.result?.targetInfo as TargetInfo | undefined) ?? undefined
          if (info !== undefined) browserTarget = info
          return []
        }
        if (message.id === discoveryId) {
          ready = true
          return waiting.splice(0).flatMap(fromClientNow)
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

  return {
    open: () => {
      // The connection's browser target first (its answer comes before discovery's), then discovery.
      const browser = own("Target.getTargetInfo")
      const discovery = own("Target.setDiscoverTargets", { discover: true, filter: [{}] })
      browserTargetId = idOf(browser)
      discoveryId = idOf(discovery)
      return [browser, discovery]
    },
    fromClient: (frame) => {
      if (!ready) {
        waiting.push(frame)
        return []
      }
      return fromClientNow(frame)
    },
    fromUpstream
  }
}
