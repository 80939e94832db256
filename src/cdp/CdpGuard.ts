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
 */
export type Verdict =
  { readonly _tag: "Forward" } | { readonly _tag: "Answer"; readonly reply: string; readonly hangUp: boolean }

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

/** True for a URL the browser must not be sent to (also inside `view-source:`). */
export const isBlockedUrl = (url: unknown): boolean => {
  if (typeof url !== "string") return false
  const trimmed = url.trim().toLowerCase()
  if (trimmed.startsWith("view-source:")) return isBlockedUrl(trimmed.slice("view-source:".length))
  const scheme = /^([a-z][a-z0-9+.-]*:)/.exec(trimmed)?.[1]
  return scheme !== undefined && BLOCKED_SCHEMES.has(scheme)
}

// Cheap pre-checks: a frame is parsed only if it may hold one of these
// commands, or escapes that could spell one in disguise.
const NEEDLES = ["Browser.close", "Page.navigate", "Target.createTarget", "sendMessageToTarget", "\\u"]

interface Message {
  readonly id?: unknown
  readonly method?: unknown
  readonly params?: { readonly url?: unknown; readonly message?: unknown } | undefined
  readonly sessionId?: unknown
}

const reply = (message: Message, body: object) =>
  JSON.stringify(
    typeof message.sessionId === "string"
      ? { id: message.id, ...body, sessionId: message.sessionId }
      : { id: message.id, ...body }
  )

const blocked = (message: Message): boolean => {
  switch (message.method) {
    case "Page.navigate":
    case "Target.createTarget":
      return isBlockedUrl(message.params?.url)
    case "Target.sendMessageToTarget": {
      // The legacy, non-flattened form carries a command as a JSON string.
      const inner = message.params?.message
      if (typeof inner !== "string") return false
      try {
        return blocked(JSON.parse(inner) as Message)
      } catch {
        return false
      }
    }
    default:
      return false
  }
}

export const inspect = (frame: string): Verdict => {
  if (!NEEDLES.some((needle) => frame.includes(needle))) return FORWARD
  let message: Message
  try {
    message = JSON.parse(frame) as Message
  } catch {
    return FORWARD
  }
  if (typeof message !== "object" || message === null || typeof message.id !== "number") return FORWARD
  if (message.method === "Browser.close")
    return { _tag: "Answer", reply: reply(message, { result: {} }), hangUp: true }
  if (!blocked(message)) return FORWARD
  // The shape of a failed navigation, so clients report it as they would any
  // blocked load (puppeteer: "net::ERR_BLOCKED_BY_CLIENT at chrome://...").
  return message.method === "Page.navigate"
    ? {
        _tag: "Answer",
        reply: reply(message, { result: { frameId: "", errorText: "net::ERR_BLOCKED_BY_CLIENT" } }),
        hangUp: false
      }
    : {
        _tag: "Answer",
        reply: reply(message, {
          error: { code: -32000, message: "net::ERR_BLOCKED_BY_CLIENT: this URL is blocked by the service" }
        }),
        hangUp: false
      }
}
