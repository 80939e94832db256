import type { Verdict } from "../../platform/net/Splice.ts"
/**
 * What the relay does with a client's CDP frame before it reaches Chromium.
 * Most frames pass untouched; a few commands are answered by the relay:
 *
 * - `Browser.close` would kill the session's browser, which only the API may
 *   end: it is answered as done and this client is hung up.
 * - Navigations to the browser's own pages and files (`chrome://`,
 *   `devtools://`, `file://`, ...) are answered as blocked. Chromium refuses
 *   them when a page asks (scripts, links, windows, frames, redirects); only
 *   the browser-initiated commands a CDP client sends could reach them.
 *   (Intercepting `file://` inside the browser with the Fetch domain instead
 *   cost about 10 ms on every navigation, measured.)
 * - Commands that read the host's files, crash the browser or hand a page a
 *   CDP channel of its own (which this guard would not see) are refused with
 *   an error.
 * - `Browser.setDownloadBehavior` / `Page.setDownloadBehavior` (playwright
 *   sends one when it connects) keep their behavior, but downloads go to the
 *   session's own directory, whatever `downloadPath` the client named; the
 *   `default` behavior is that directory too (`BrowserDownloads`).
 */
export type { Verdict }

/** What the guard knows of the session a frame is for. */
export interface GuardContext {
  /** Where this session's downloads go: a client's `downloadPath` is replaced by it. */
  readonly downloadsDir: string
}

const FORWARD: Verdict = { _tag: "Forward" }

const BLOCKED_SCHEMES = new Set([
  "chrome:",
  "chrome-untrusted:",
  "chrome-extension:",
  "chrome-search:",
  "devtools:",
  "file:",
  "filesystem:"
])

/**
 * The scheme a browser reads from `url`, as the WHATWG URL parser does:
 * leading and trailing C0 controls and spaces are stripped and tabs and
 * newlines removed anywhere, so `"\u0001fi\tle:///"` is `file:`.
 */
export const schemeOf = (url: string): string | undefined => {
  const cleaned = url.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "").replace(/[\t\n\r]/g, "")
  return /^([a-zA-Z][a-zA-Z0-9+.-]*:)/.exec(cleaned)?.[1]?.toLowerCase()
}

/** True for a URL the browser must not be sent to (also inside `view-source:`). */
export const isBlockedUrl = (url: unknown): boolean => {
  if (typeof url !== "string") return false
  const scheme = schemeOf(url)
  if (scheme === undefined) return false
  if (scheme === "view-source:") {
    const cleaned = url.replace(/^[\u0000-\u0020]+/, "").replace(/[\t\n\r]/g, "")
    return isBlockedUrl(cleaned.slice("view-source:".length))
  }
  return BLOCKED_SCHEMES.has(scheme)
}

/** Commands refused outright, with the reason the client reads. */
const REFUSED: Record<string, string> = {
  "DOM.setFileInputFiles": "file paths on the service's host are not available to sessions",
  "Target.exposeDevToolsProtocol": "pages cannot be given a DevTools channel",
  "Browser.crash": "a session ends through the API (DELETE /v1/sessions/{id})",
  "Browser.crashGpuProcess": "a session ends through the API (DELETE /v1/sessions/{id})",
  "Target.setRemoteLocations": "the browser cannot be pointed at other DevTools hosts"
}

// Cheap pre-checks: a frame is parsed only if it may hold one of these
// commands, or escapes that could spell one in disguise.
const NEEDLES = [
  "Browser.",
  "Page.navigate",
  "Page.setDownloadBehavior",
  "Target.",
  "setFileInputFiles",
  "dispatchDragEvent",
  "\\u"
]

const NEEDLE_BYTES = NEEDLES.map((needle) => Buffer.from(needle, "utf8"))

const mayHoldNeedle = (frame: string | Buffer): boolean => {
  if (typeof frame === "string") return NEEDLES.some((needle) => frame.includes(needle))
  for (const needle of NEEDLE_BYTES) if (frame.includes(needle)) return true
  return false
}

interface Message {
  readonly id?: unknown
  readonly method?: unknown
  readonly params?:
    | {
        readonly url?: unknown
        readonly message?: unknown
        readonly data?: { readonly files?: unknown } | undefined
      }
    | undefined
  readonly sessionId?: unknown
}

const reply = (message: Message, body: object) =>
  JSON.stringify(
    typeof message.sessionId === "string"
      ? { id: message.id, ...body, sessionId: message.sessionId }
      : { id: message.id, ...body }
  )

/** Why `message` may not reach the browser, if it may not. */
const refusal = (message: Message): string | undefined => {
  if (typeof message.method !== "string") return undefined
  const refused = REFUSED[message.method]
  if (refused !== undefined) return refused
  switch (message.method) {
    case "Page.navigate":
    case "Target.createTarget":
      return isBlockedUrl(message.params?.url) ? "net::ERR_BLOCKED_BY_CLIENT" : undefined
    case "Input.dispatchDragEvent": {
      const files = message.params?.data?.files
      return Array.isArray(files) && files.length > 0
        ? "file paths on the service's host are not available to sessions"
        : undefined
    }
    case "Target.sendMessageToTarget": {
      // The legacy, non-flattened form carries a command as a JSON string.
      const inner = message.params?.message
      if (typeof inner !== "string") return undefined
      try {
        return refusal(JSON.parse(inner) as Message)
      } catch {
        return undefined
      }
    }
    default:
      return undefined
  }
}

const DOWNLOAD_METHODS = new Set(["Browser.setDownloadBehavior", "Page.setDownloadBehavior"])

/**
 * The verdict on one client frame, as text or as the bytes `ws` read
 * (searched without decoding: most frames hold no needle and pass as they are).
 */
export const inspect = (frame: string | Buffer, context: GuardContext): Verdict => {
  if (!mayHoldNeedle(frame)) return FORWARD
  let message: Message
  try {
    message = JSON.parse(typeof frame === "string" ? frame : frame.toString("utf8")) as Message
  } catch {
    return FORWARD
  }
  if (typeof message !== "object" || message === null || typeof message.id !== "number") return FORWARD
  if (message.method === "Browser.close")
    return { _tag: "Answer", reply: reply(message, { result: {} }), hangUp: true }
  if (typeof message.method === "string" && DOWNLOAD_METHODS.has(message.method)) {
    const params = (message.params ?? {}) as Record<string, unknown>
    // "default" would hand downloads back to Chromium's own folder, in the profile that goes with the
    // browser: the session's folder is the default here.
    const behavior = params.behavior === "default" ? "allow" : params.behavior
    if (params.downloadPath === undefined && params.behavior !== "default") return FORWARD
    return {
      _tag: "Rewrite",
      frame: JSON.stringify({
        ...message,
        params: { ...params, behavior, downloadPath: context.downloadsDir }
      })
    }
  }
  const reason = refusal(message)
  if (reason === undefined) return FORWARD
  // A blocked navigation answers as a failed one, so clients report it as they
  // would any blocked load (puppeteer: "net::ERR_BLOCKED_BY_CLIENT at chrome://...").
  if (message.method === "Page.navigate" && reason === "net::ERR_BLOCKED_BY_CLIENT") {
    return {
      _tag: "Answer",
      reply: reply(message, { result: { frameId: "", errorText: "net::ERR_BLOCKED_BY_CLIENT" } }),
      hangUp: false
    }
  }
  return {
    _tag: "Answer",
    reply: reply(message, {
      error: {
        code: -32000,
        message:
          reason === "net::ERR_BLOCKED_BY_CLIENT"
            ? "net::ERR_BLOCKED_BY_CLIENT: this URL is blocked by the service"
            : `Refused by the service: ${reason}.`
      }
    }),
    hangUp: false
  }
}
