import { nameOk } from "./BrowserDownloads.ts"
import { type Context, Metric } from "effect"
import { CLIENT_MAX_MESSAGE } from "../../platform/net/WebSocketEnds.ts"
import type { Command, Inspector, Verdict } from "../../platform/net/Splice.ts"

/**
 * What the relay does with a client's CDP frame before it reaches Chromium.
 * It is the second wall: the first is the browser's cell, which lets the
 * browser reach nothing but its egress proxy and read nothing but its own
 * profile whatever it is told. The guard keeps a session's client from
 * asking for what the cell would then refuse, and from what the cell cannot
 * see (a browser closed under its session, a page handed a CDP channel).
 *
 * Every frame is read once, here, and what Chromium receives is the message
 * that was checked, written anew: a frame Chromium's parser would read
 * otherwise (comments, `\v`, raw control characters, duplicate keys, CBOR in
 * a binary frame) never reaches it as sent.
 *
 * - Binary frames, frames that are not a JSON object with an integer `id`
 *   and a string `method`, and frames over `MAX_CLIENT_FRAME` are refused
 *   with a CDP error.
 * - At the browser level (no `sessionId`), and for the browser's own domains
 *   (`Target`, `Browser`, ...) in any session, only `BROWSER_METHODS` pass.
 * - `Browser.close` would kill the session's browser, which only the API may
 *   end: it is answered as done and this client is hung up.
 * - A URL anywhere in a command's parameters (a `url` key) must be `http`,
 *   `https`, `ws`, `wss`, `data`, `blob` or `about:blank`; a navigation to
 *   anything else is answered as blocked.
 * - A browser context with a proxy, a bypass list or network access of its
 *   own is refused: every context's traffic goes through the session's
 *   egress proxy, which meters it.
 * - Host paths are refused (file inputs, dropped files); download behaviors
 *   keep their behavior, but downloads go to the session's own directory,
 *   whatever `downloadPath` the client named (`BrowserDownloads`).
 * - Only flattened sessions (`flatten: true`), whose frames carry their
 *   `sessionId` and so pass this guard; the legacy form's would not.
 */
export type { Verdict }

/** What the guard knows of the session a frame is for. */
export interface GuardContext {
  /** Where this session's downloads go: a client's `downloadPath` is replaced by it. */
  readonly downloadsDir: string
  /** Where its uploads are: the one dir a file input may be given files from. */
  readonly uploadsDir: string
  /**
   * A page client's connection (`/devtools/page/{id}`): a frame without a
   * `sessionId` is the page's (the relay puts it in the page's session), not
   * the browser's, and is checked as one.
   */
  readonly pageLevel?: boolean | undefined
}

/**
 * The largest frame a client may send: the relay's own limit of a client's
 * message, which closes a larger one before it is read (this answers one that
 * reached the guard some other way). Chromium's answers, which may be far
 * larger (screenshots), pass untouched.
 */
export const MAX_CLIENT_FRAME = CLIENT_MAX_MESSAGE

/** Why a frame was refused, as the `rbs_cdp_refused_total` counter names it. */
export type Refusal =
  "binary" | "oversized" | "unparsable" | "malformed" | "method" | "url" | "path" | "network" | "unflattened"

/** What a refused frame is answered with, and why. */
export interface Refused {
  readonly _tag: "Answer"
  readonly reply: string
  readonly hangUp: boolean
  readonly refused?: Refusal | undefined
}

/** The schemes a page may be sent to (`about:` only as `about:blank`). */
const ALLOWED_SCHEMES = new Set(["http:", "https:", "ws:", "wss:", "data:", "blob:"])

/**
 * The scheme a browser reads from `url`, as the WHATWG URL parser does:
 * leading and trailing C0 controls and spaces are stripped and tabs and
 * newlines removed anywhere, so `"\u0001fi\tle:///"` is `file:`.
 */
export const schemeOf = (url: string): string | undefined => {
  const cleaned = url.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "").replace(/[\t\n\r]/g, "")
  return /^([a-zA-Z][a-zA-Z0-9+.-]*:)/.exec(cleaned)?.[1]?.toLowerCase()
}

/** True for a URL no page of a session may be sent to (anything but `ALLOWED_SCHEMES` and `about:blank`). */
export const isBlockedUrl = (url: unknown): boolean => {
  if (typeof url !== "string") return false
  // Chromium reads an empty URL as about:blank.
  if (url === "") return false
  const scheme = schemeOf(url)
  if (scheme === undefined) return true
  if (scheme === "about:") {
    const rest = url
      .replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "")
      .replace(/[\t\n\r]/g, "")
      .slice("about:".length)
      .toLowerCase()
    return !/^blank(?:[?#].*)?$/s.test(rest)
  }
  return !ALLOWED_SCHEMES.has(scheme)
}

/**
 * Methods a client may call at the browser level (and, of the browser's own
 * domains, in any session): what puppeteer and playwright use, and the
 * harmless reads beside them. Anything else there is refused.
 */
const BROWSER_METHODS = new Set([
  "Target.setDiscoverTargets",
  "Target.setAutoAttach",
  "Target.autoAttachRelated",
  "Target.getTargets",
  "Target.getTargetInfo",
  "Target.getBrowserContexts",
  "Target.createBrowserContext",
  "Target.disposeBrowserContext",
  "Target.createTarget",
  "Target.closeTarget",
  "Target.activateTarget",
  "Target.attachToTarget",
  "Target.attachToBrowserTarget",
  "Target.detachFromTarget",
  "Browser.getVersion",
  "Browser.close",
  "Browser.setDownloadBehavior",
  "Browser.cancelDownload",
  "Browser.getWindowForTarget",
  "Browser.getWindowBounds",
  "Browser.setWindowBounds",
  "Browser.setContentsSize",
  "Browser.grantPermissions",
  "Browser.resetPermissions",
  "Browser.setPermission",
  "Browser.setDockTile",
  "Browser.getHistograms",
  "Browser.getHistogram",
  "Storage.getCookies",
  "Storage.setCookies",
  "Storage.clearCookies",
  "Tracing.start",
  "Tracing.end",
  "Tracing.getCategories",
  "Tracing.requestMemoryDump",
  "Tracing.recordClockSyncMarker",
  "IO.read",
  "IO.close",
  "SystemInfo.getInfo",
  "SystemInfo.getFeatureState",
  "SystemInfo.getProcessInfo",
  "Schema.getDomains"
])

/** The browser's own domains: their methods pass only if listed above, whatever session they come in. */
const BROWSER_DOMAINS = new Set(["Target", "Browser", "SystemInfo", "Extensions", "PWA", "Cast"])

/** Commands refused wherever they come, with the reason the client reads. */
const REFUSED: Record<string, readonly [Refusal, string]> = {
  "Page.handleFileChooser": ["path", "file paths on the service's host are not available to sessions"],
  "Target.exposeDevToolsProtocol": ["method", "pages cannot be given a DevTools channel"],
  "Target.sendMessageToTarget": ["unflattened", "only flattened sessions are supported (flatten: true)"],
  "Target.setRemoteLocations": ["method", "the browser cannot be pointed at other DevTools hosts"],
  "Target.openDevTools": ["method", "the browser's own DevTools pages are not available to sessions"],
  "Target.getDevToolsTarget": ["method", "the browser's own DevTools pages are not available to sessions"],
  "Browser.crash": ["method", "a session ends through the API (DELETE /v1/sessions/{id})"],
  "Browser.crashGpuProcess": ["method", "a session ends through the API (DELETE /v1/sessions/{id})"]
}

/**
 * Whether `file` names a file directly in `uploadsDir` by an absolute path with no `.` or `..` step
 * (as the upload route answered it): nothing of the host beside the session's uploads.
 */
const isUpload = (uploadsDir: string, file: string) => {
  if (!file.startsWith(`${uploadsDir}/`)) return false
  const name = file.slice(uploadsDir.length + 1)
  return nameOk(name) && !name.startsWith(".")
}

/** A browser context's own network settings: its traffic is the session's, through its proxy. */
const CONTEXT_NETWORK = ["proxyServer", "proxyBypassList", "originsWithUniversalNetworkAccess"]

const DOWNLOAD_METHODS = new Set(["Browser.setDownloadBehavior", "Page.setDownloadBehavior"])

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const reply = (id: unknown, body: object, sessionId: string | undefined) =>
  JSON.stringify(sessionId === undefined ? { id, ...body } : { id, ...body, sessionId })

const refuse = (
  refused: Refusal,
  id: number | undefined,
  message: string,
  sessionId?: string,
  code = -32000
): Refused => ({
  _tag: "Answer",
  reply:
    id === undefined
      ? JSON.stringify({ error: { code, message } })
      : reply(id, { error: { code, message } }, sessionId),
  hangUp: false,
  refused
})

/** The id a frame too large to read names first, if it does: its refusal answers that command. */
const leadingId = (frame: Buffer): number | undefined => {
  const match = /^\s*\{\s*"id"\s*:\s*(\d{1,10})\s*[,}]/.exec(frame.toString("latin1", 0, 64))
  return match === null ? undefined : Number(match[1])
}

/** Every `url` in `value` (its keys named so, at any depth), as the command's parameters hold them. */
const urlsIn = (value: unknown, found: Array<unknown> = [], depth = 0): Array<unknown> => {
  if (depth > 16 || typeof value !== "object" || value === null) return found
  if (Array.isArray(value)) {
    for (const item of value) urlsIn(item, found, depth + 1)
    return found
  }
  for (const [key, item] of Object.entries(value)) {
    if (key === "url") found.push(item)
    else urlsIn(item, found, depth + 1)
  }
  return found
}

/** The checked command, written anew with only what a command holds. */
const command = (message: Record<string, unknown>, params: Record<string, unknown> | undefined): Command => {
  const written: { id: number; method: string; params?: Record<string, unknown>; sessionId?: string } = {
    id: message.id as number,
    method: message.method as string
  }
  if (params !== undefined) written.params = params
  if (typeof message.sessionId === "string") written.sessionId = message.sessionId
  return written
}

/** The verdict on one client frame (`binary`: it came as a binary frame). */
export const inspect = (frame: Buffer, binary: boolean, context: GuardContext): Verdict | Refused => {
  if (frame.length > MAX_CLIENT_FRAME)
    return refuse(
      "oversized",
      leadingId(frame),
      `Refused by the service: a frame of ${frame.length} bytes is over the ${MAX_CLIENT_FRAME}-byte limit of a client's frame.`
    )
  if (binary)
    return refuse(
      "binary",
      undefined,
      "Refused by the service: binary frames are not accepted; send each message as a JSON text frame.",
      undefined,
      -32700
    )
  let message: unknown
  try {
    message = JSON.parse(frame.toString("utf8"))
  } catch {
    return refuse("unparsable", undefined, "Message must be a valid JSON", undefined, -32700)
  }
  if (!isObject(message))
    return refuse("malformed", undefined, "Message must be an object", undefined, -32600)
  const { id, method, sessionId, params } = message
  if (
    typeof id !== "number" ||
    !Number.isSafeInteger(id) ||
    id < 0 ||
    id > 2 ** 31 - 1 ||
    typeof method !== "string" ||
    method === ""
  )
    return refuse(
      "malformed",
      undefined,
      "Message must have integer 'id' and string 'method' properties",
      undefined,
      -32600
    )
  if (sessionId !== undefined && typeof sessionId !== "string")
    return refuse("malformed", id, "Message has property other than 'id', 'method', 'sessionId', 'params'")
  if (params !== undefined && !isObject(params))
    return refuse("malformed", id, "Invalid parameters", sessionId, -32602)
  const session = sessionId as string | undefined

  const refused = REFUSED[method]
  if (refused !== undefined) return refuse(refused[0], id, `Refused by the service: ${refused[1]}.`, session)
  const domain = method.slice(0, method.indexOf("."))
  const browserLevel = session === undefined && context.pageLevel !== true
  if ((browserLevel || BROWSER_DOMAINS.has(domain)) && !BROWSER_METHODS.has(method))
    return refuse(
      "method",
      id,
      `Refused by the service: ${method} is not available to a session's client${browserLevel ? " at the browser level" : ""}.`,
      session
    )

  if (method === "Browser.close")
    return { _tag: "Answer", reply: reply(id, { result: {} }, session), hangUp: true }

  for (const url of urlsIn(params)) {
    if (!isBlockedUrl(url)) continue
    // A blocked navigation answers as a failed one, so clients report it as they would any blocked
    // load (puppeteer: "net::ERR_BLOCKED_BY_CLIENT at chrome://...").
    if (method === "Page.navigate")
      return {
        _tag: "Answer",
        reply: reply(id, { result: { frameId: "", errorText: "net::ERR_BLOCKED_BY_CLIENT" } }, session),
        hangUp: false,
        refused: "url"
      }
    return refuse(
      "url",
      id,
      "net::ERR_BLOCKED_BY_CLIENT: this URL is blocked by the service (only http, https, ws, wss, data, blob and about:blank)",
      session
    )
  }

  switch (method) {
    case "DOM.setFileInputFiles": {
      // Files the session uploaded (`POST /v1/sessions/{id}/uploads`), by the path it was answered;
      // nothing else of the host.
      const files = params?.files
      if (
        !Array.isArray(files) ||
        files.length === 0 ||
        !files.every((file) => typeof file === "string" && isUpload(context.uploadsDir, file))
      )
        return refuse(
          "path",
          id,
          "Refused by the service: a file input takes only the session's own uploads (POST /v1/sessions/{id}/uploads answers their paths); other paths of the service's host are not available to sessions.",
          session
        )
      break
    }
    case "Input.dispatchDragEvent": {
      const data = params?.data
      if (isObject(data) && Array.isArray(data.files) && data.files.length > 0)
        return refuse(
          "path",
          id,
          "Refused by the service: file paths on the service's host are not available to sessions.",
          session
        )
      break
    }
    case "Target.createBrowserContext": {
      const named = CONTEXT_NETWORK.filter((key) => params?.[key] !== undefined)
      if (named.length > 0)
        return refuse(
          "network",
          id,
          `Refused by the service: a browser context's traffic goes through its session's egress proxy (${named.join(", ")} cannot be set).`,
          session
        )
      break
    }
    case "Target.attachToTarget":
    case "Target.setAutoAttach":
      if (params?.flatten !== true && (method === "Target.attachToTarget" || params?.autoAttach === true))
        return refuse(
          "unflattened",
          id,
          "Refused by the service: only flattened sessions are supported (flatten: true).",
          session
        )
      break
  }

  if (DOWNLOAD_METHODS.has(method)) {
    const asked = params ?? {}
    // "default" would hand downloads back to Chromium's own folder, in the profile that goes with the
    // browser: the session's folder is the default here.
    const behavior = asked.behavior === "default" ? "allow" : asked.behavior
    const { downloadPath: _named, ...rest } = asked
    return {
      _tag: "Send",
      command: command(
        message,
        behavior === "deny"
          ? { ...rest, behavior }
          : { ...rest, behavior, downloadPath: context.downloadsDir }
      )
    }
  }
  return { _tag: "Send", command: command(message, params) }
}

export const cdpRefused = Metric.counter("rbs_cdp_refused_total", {
  description:
    "Client CDP frames the relay's guard refused, by reason (binary, oversized, unparsable, malformed, method, url, path, network, unflattened)"
})

/**
 * The guard of one session's relay: `inspect` with `context`, each refusal
 * counted against the service's metrics (`services`: the relay calls it
 * outside any fiber, frame by frame).
 */
export const make =
  (context: GuardContext, services: Context.Context<never>): Inspector =>
  (frame, binary) => {
    const verdict = inspect(frame, binary, context)
    if (verdict._tag === "Answer" && verdict.refused !== undefined)
      Metric.withAttributes(cdpRefused, { reason: verdict.refused }).updateUnsafe(1, services)
    return verdict
  }
