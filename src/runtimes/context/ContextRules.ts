// What ContextScope reads of CDP frames, and the rules it holds browser-level
// commands to: which methods name a context, a target or a window of the
// session's, which pass, which are refused and why.

/** The first of the relay's own command ids. */
export const OWN_IDS = 2 ** 30
export const OWN_IDS_END = 2 ** 31 - 1

export interface TargetInfo {
  readonly targetId: string
  readonly type: string
  readonly browserContextId?: string
  readonly [key: string]: unknown
}

export interface Message {
  readonly id?: unknown
  readonly method?: unknown
  readonly params?: Record<string, unknown>
  readonly sessionId?: unknown
  readonly result?: Record<string, unknown>
  readonly error?: unknown
}

export type TargetFilter = ReadonlyArray<{ readonly type?: string; readonly exclude?: boolean }>

/** Chromium's filter when none is given: everything but the browser and tabs. */
export const DEFAULT_FILTER: TargetFilter = [
  { type: "browser", exclude: true },
  { type: "tab", exclude: true },
  {}
]

/** The first entry that matches decides; none matching excludes. */
export const passes = (filter: TargetFilter, type: string) => {
  for (const entry of filter) {
    if (entry.type === undefined || entry.type === type) return entry.exclude !== true
  }
  return false
}

/** What a pending command of the client's needs done to its response. */
export type Pending =
  | { readonly _tag: "Targets" }
  | { readonly _tag: "Window" }
  | { readonly _tag: "Attach"; readonly targetId: string }

/** Browser-level methods that name their context in `browserContextId`: absent means this one. */
export const CONTEXT_METHODS = new Set([
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
export const TARGET_METHODS = new Set([
  "Target.attachToTarget",
  "Target.activateTarget",
  "Target.closeTarget",
  "Target.autoAttachRelated",
  "Browser.getWindowForTarget"
])

/** Browser-level methods naming a window of the context's (one `Browser.getWindowForTarget` answered). */
export const WINDOW_METHODS = new Set([
  "Browser.getWindowBounds",
  "Browser.setWindowBounds",
  "Browser.setContentsSize"
])

/**
 * The browser's own domains: Chromium serves them in a page's session too,
 * as if at the browser level (`Target.getTargets` lists every context's
 * targets there), so there they get the browser level's checks.
 */
export const BROWSER_DOMAINS = new Set(["Target", "Browser", "SystemInfo"])

/** Browser-level methods that pass as they are. */
export const PLAIN_METHODS = new Set(["Browser.getVersion", "Target.setAutoAttach"])

export const REFUSED: Record<string, string> = {
  "Target.attachToBrowserTarget": "the browser target reaches every session's context",
  "Target.createBrowserContext":
    "a context session is one browser context (create another session for another)",
  "Target.disposeBrowserContext": "a session's context ends with the session (DELETE /v1/sessions/{id})",
  "Target.sendMessageToTarget": "only flattened sessions are supported (flatten: true)"
}

/** A reply to the client, in the session the command came in (`undefined`: the connection's own). */
export const reply = (id: unknown, body: object, sessionId?: string) =>
  JSON.stringify(sessionId === undefined ? { id, ...body } : { id, ...body, sessionId })

export const error = (id: unknown, message: string, sessionId?: string, code = -32000) =>
  reply(id, { error: { code, message } }, sessionId)

export const text = (frame: string | Buffer) => (typeof frame === "string" ? frame : frame.toString("utf8"))

/** `"sessionId":"..."}` at the end of a frame, where Chromium puts it. */
const TAIL_SESSION = /"sessionId":"([^"\\]+)"\}\s*$/

export const sessionOf = (frame: string | Buffer): string | undefined => {
  const tail =
    typeof frame === "string" ? frame.slice(-160) : frame.toString("latin1", Math.max(0, frame.length - 160))
  return TAIL_SESSION.exec(tail)?.[1]
}

/** Chromium writes an event's method first: `{"method":"Target.` announces one the scope reads. */
export const TARGET_EVENT_HEAD = '{"method":"Target.'
export const startsWith = (frame: string | Buffer, head: string) =>
  typeof frame === "string" ? frame.startsWith(head) : frame.toString("latin1", 0, head.length) === head
