import { Effect } from "effect"
import type { Schema } from "effect"
import { MAX_LOG_TEXT } from "../../kernel/SessionLog.ts"
import type { CdpClient } from "../../platform/cdp/CdpClient.ts"
import type { FollowedPage, PageFollower } from "../../platform/cdp/PageFollower.ts"
import type { EgressRefusal, EgressTap } from "../../runtime/EgressTap.ts"
import { redactHeaders, redactText, redactUrl } from "../../runtime/LogRedaction.ts"
import { bounded, type LogSink, type PageLogSource } from "../../runtime/PageLog.ts"

/** Requests the log follows at once; past it, the oldest is logged unfinished to make room. */
const MAX_PENDING = 2_000
/** How long after the proxy refused a host a failed request to it is taken as that refusal. */
const REFUSAL_MATCH_MS = 10_000

interface TargetInfo {
  readonly targetId: string
  readonly type: string
  readonly url: string
  readonly openerId?: string | undefined
  readonly browserContextId?: string | undefined
}

interface RemoteObject {
  readonly type: string
  readonly value?: unknown
  readonly unserializableValue?: string
  readonly description?: string
  readonly preview?: {
    readonly subtype?: string
    readonly overflow?: boolean
    readonly properties?: ReadonlyArray<{
      readonly name: string
      readonly type: string
      readonly value?: string
    }>
  }
}

interface Response {
  readonly url: string
  readonly status: number
  readonly statusText: string
  readonly headers: Record<string, unknown>
  readonly mimeType: string
  readonly protocol?: string
  readonly remoteIPAddress?: string
  readonly remotePort?: number
  readonly fromDiskCache?: boolean
  readonly fromServiceWorker?: boolean
  readonly encodedDataLength?: number
  readonly timing?: Record<string, number>
}

/** A request the log has seen start and not end. */
interface Pending {
  readonly requestId: string
  readonly targetId: string
  readonly method: string
  readonly url: string
  readonly type: string
  /** Epoch ms, and the browser's monotonic clock in seconds, at its start. */
  readonly wallMs: number
  readonly monotonic: number
  readonly headers: Record<string, string>
  readonly postDataBytes: number
  response?: Response
}

const text = (value: string) => bounded(redactText(value), MAX_LOG_TEXT)

/** The most headers a request's record keeps of each side; a page may send many, and long ones. */
const MAX_HEADERS = 100

/** A side's headers as the log keeps them: credentials redacted, each value bounded, 100 at most. */
const headersOf = (headers: Readonly<Record<string, unknown>> | undefined) =>
  Object.fromEntries(
    Object.entries(
      redactHeaders(Object.fromEntries(Object.entries(headers ?? {}).slice(0, MAX_HEADERS)))
    ).map(([name, value]) => [bounded(name, 256), bounded(value, MAX_LOG_TEXT)])
  )

/** A console argument as DevTools' console shows it, short: an object by its preview (`{ok: true}`). */
const shown = (arg: RemoteObject) => {
  if (arg.unserializableValue !== undefined) return arg.unserializableValue
  if (arg.value !== undefined) return typeof arg.value === "string" ? arg.value : JSON.stringify(arg.value)
  const preview = arg.preview
  if (preview !== undefined && Array.isArray(preview.properties)) {
    const more = preview.overflow === true ? ", …" : ""
    return preview.subtype === "array"
      ? `[${preview.properties.map((p) => p.value ?? p.type).join(", ")}${more}]`
      : `{${preview.properties.map((p) => `${p.name}: ${p.value ?? p.type}`).join(", ")}${more}}`
  }
  return arg.description ?? arg.type
}

/** HAR's phases (ms, -1 for a phase that did not happen) from Chromium's resource timing. */
const phases = (timing: Record<string, number> | undefined, totalMs: number) => {
  if (timing === undefined) return null
  const span = (start: string, end: string) =>
    (timing[start] ?? -1) < 0 || (timing[end] ?? -1) < 0 ? -1 : round(timing[end]! - timing[start]!)
  const sendEnd = timing.sendEnd ?? 0
  const headersEnd = timing.receiveHeadersEnd ?? sendEnd
  return {
    blocked: Math.max(
      -1,
      round((timing.dnsStart ?? -1) >= 0 ? timing.dnsStart! : (timing.connectStart ?? -1))
    ),
    dns: span("dnsStart", "dnsEnd"),
    connect: span("connectStart", "connectEnd"),
    ssl: span("sslStart", "sslEnd"),
    send: span("sendStart", "sendEnd"),
    wait: round(Math.max(0, headersEnd - sendEnd)),
    receive: round(Math.max(0, totalMs - headersEnd))
  }
}

const round = (ms: number) => Math.round(ms * 1000) / 1000

const hostOf = (url: string) => {
  try {
    return new URL(url).hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase()
  } catch {
    return ""
  }
}

/** Where a log reads a browser's pages from. */
export interface PageLogWiring {
  /** A connection whose target discovery sees the pages open, close and navigate. */
  readonly targets: CdpClient
  /** The connection `follower` holds the pages on: their requests, console and errors arrive there. */
  readonly pages: CdpClient
  readonly follower: PageFollower
  /** The one browser context whose pages are the session's; all of them when `undefined`. */
  readonly contextId: string | undefined
  readonly egress: EgressTap
}

/**
 * What the pages of a browser (of one context, when named) do, told to a
 * session's log: each page is held by the service's own connection (the
 * browser's follower: `Network` and `Runtime` events, in a session of the
 * service's that the page and the client never see) from before it runs, so
 * its first request is in the log (a `window.open`'s too), its requests told
 * once they end (redirects each as its own), its console messages and
 * uncaught errors, its navigations, and the tabs opened and closed; and
 * every request the session's egress proxy refused. Nothing is sent to a
 * page but those two domains' `enable`: what it runs is unchanged.
 */
export const source = ({
  targets,
  pages: control,
  follower,
  contextId,
  egress
}: PageLogWiring): PageLogSource => ({
  follow: (sink: LogSink) =>
    Effect.gen(function* () {
      const pages = new Map<string, { url: string }>()
      const targetOf = new Map<string, string>()
      const pending = new Map<string, Pending>()
      const refusals = new Map<string, EgressRefusal>()
      let closed = false
      const ours = (info: TargetInfo) =>
        info.type === "page" && (contextId === undefined || info.browserContextId === contextId)

      const tell = (kind: Parameters<LogSink>[0]["kind"], at: number, data: Record<string, Schema.Json>) => {
        try {
          sink({ kind, at, data })
        } catch {
          // The writer's failure is its own: the pages go on.
        }
      }

      /** A page the follower holds: its two domains on, in its session, before it runs. */
      const attached = (page: FollowedPage) => {
        if (closed) return
        found({ ...page, type: "page" }, Date.now())
        targetOf.set(page.sessionId, page.targetId)
        // Bodies are never read: Chromium keeps none of them for this session.
        control.post("Network.enable", { maxTotalBufferSize: 0, maxResourceBufferSize: 0 }, page.sessionId)
        control.post("Runtime.enable", {}, page.sessionId)
      }

      const found = (info: TargetInfo, at: number) => {
        if (!ours(info) || pages.has(info.targetId)) return false
        pages.set(info.targetId, { url: info.url })
        tell("target_created", at, {
          target_id: info.targetId,
          url: redactUrl(bounded(info.url, MAX_LOG_TEXT)),
          opener_id: info.openerId ?? null
        })
        return true
      }

      /** The request's record, told: ended (`finished`), failed (`failure`), or cut off. */
      const finish = (
        key: string,
        end: {
          readonly monotonic?: number
          readonly bytes?: number
          readonly failure?: string
          readonly canceled?: boolean
          readonly blocked?: string
          readonly response?: Response
        }
      ) => {
        const request = pending.get(key)
        if (request === undefined) return
        pending.delete(key)
        const response = end.response ?? request.response
        const durationMs =
          end.monotonic === undefined ? null : round((end.monotonic - request.monotonic) * 1000)
        const host = hostOf(request.url)
        const refusal = refusals.get(host)
        const refused =
          refusal !== undefined &&
          Date.now() - refusal.at < REFUSAL_MATCH_MS &&
          (end.failure !== undefined || response?.status === 403 || response?.status === 502)
        if (refused) refusals.delete(host)
        tell("request", request.wallMs + (durationMs ?? 0), {
          request_id: request.requestId,
          target_id: request.targetId,
          method: request.method,
          url: request.url,
          resource_type: request.type.toLowerCase(),
          status: response?.status ?? null,
          status_text: response?.statusText ?? null,
          mime_type: response?.mimeType ?? null,
          protocol: response?.protocol ?? null,
          remote_address:
            response?.remoteIPAddress === undefined
              ? null
              : `${response.remoteIPAddress}:${response.remotePort ?? 0}`,
          from_cache: response?.fromDiskCache === true || response?.fromServiceWorker === true,
          bytes: end.bytes ?? response?.encodedDataLength ?? 0,
          post_data_bytes: request.postDataBytes,
          request_headers: request.headers,
          response_headers: response === undefined ? null : headersOf(response.headers),
          started_at: new Date(request.wallMs).toISOString(),
          duration_ms: durationMs,
          timing: phases(response?.timing, durationMs ?? 0),
          failure: end.failure ?? (end.monotonic === undefined ? "unfinished" : null),
          canceled: end.canceled === true,
          blocked_reason: end.blocked ?? null,
          refused_by_proxy: refused ? refusal!.reason : null
        })
      }

      const on = (
        method: string,
        listener: (params: any, sessionId: string | undefined) => void,
        from: CdpClient = control
      ) =>
        from.on(method, (params, sessionId) => {
          try {
            listener(params, sessionId)
          } catch {
            // An event not shaped as the protocol says is dropped, not the log.
          }
        })

      const keyOf = (sessionId: string | undefined, requestId: string) => `${sessionId}:${requestId}`

      const unlisten = [
        on(
          "Target.targetCreated",
          ({ targetInfo }: { targetInfo: TargetInfo }) => found(targetInfo, Date.now()),
          targets
        ),
        on(
          "Target.targetInfoChanged",
          ({ targetInfo }: { targetInfo: TargetInfo }) => {
            const page = pages.get(targetInfo.targetId)
            if (page === undefined || page.url === targetInfo.url) return
            page.url = targetInfo.url
            tell("navigation", Date.now(), {
              target_id: targetInfo.targetId,
              url: redactUrl(bounded(targetInfo.url, MAX_LOG_TEXT))
            })
          },
          targets
        ),
        on(
          "Target.targetDestroyed",
          ({ targetId }: { targetId: string }) => {
            if (!pages.delete(targetId)) return
            tell("target_closed", Date.now(), { target_id: targetId })
          },
          targets
        ),
        on("Network.requestWillBeSent", (params, sessionId) => {
          const targetId = sessionId === undefined ? undefined : targetOf.get(sessionId)
          if (targetId === undefined) return
          const url: string = params.request.url
          if (url.startsWith("data:") || url.startsWith("blob:")) return
          const key = keyOf(sessionId, params.requestId)
          // A redirect ends the request before it: each hop is its own record.
          if (params.redirectResponse !== undefined)
            finish(key, {
              monotonic: params.timestamp,
              response: params.redirectResponse,
              bytes: params.redirectResponse.encodedDataLength
            })
          if (pending.size >= MAX_PENDING) finish(pending.keys().next().value!, {})
          pending.set(key, {
            requestId: params.requestId,
            targetId,
            method: params.request.method,
            url: redactUrl(bounded(url, MAX_LOG_TEXT)),
            type: params.type ?? "Other",
            wallMs: Math.round((params.wallTime ?? Date.now() / 1000) * 1000),
            monotonic: params.timestamp,
            headers: headersOf(params.request.headers),
            postDataBytes: (params.request.postDataEntries ?? []).reduce(
              (sum: number, entry: { bytes?: string }) =>
                sum + Math.floor(((entry.bytes ?? "").length * 3) / 4),
              0
            )
          })
        }),
        on("Network.responseReceived", (params, sessionId) => {
          const request = pending.get(keyOf(sessionId, params.requestId))
          if (request !== undefined) request.response = params.response
        }),
        on("Network.loadingFinished", (params, sessionId) =>
          finish(keyOf(sessionId, params.requestId), {
            monotonic: params.timestamp,
            bytes: params.encodedDataLength
          })
        ),
        on("Network.loadingFailed", (params, sessionId) =>
          finish(keyOf(sessionId, params.requestId), {
            monotonic: params.timestamp,
            failure: params.errorText ?? "failed",
            canceled: params.canceled === true,
            ...(params.blockedReason === undefined ? {} : { blocked: params.blockedReason })
          })
        ),
        on("Runtime.consoleAPICalled", (params, sessionId) => {
          const targetId = sessionId === undefined ? undefined : targetOf.get(sessionId)
          if (targetId === undefined) return
          const frame = params.stackTrace?.callFrames?.[0]
          tell("console", Math.round(params.timestamp ?? Date.now()), {
            target_id: targetId,
            level: String(params.type),
            text: text((params.args ?? []).map(shown).join(" ")),
            url: frame?.url ? redactUrl(bounded(frame.url, MAX_LOG_TEXT)) : null,
            line: frame === undefined ? null : frame.lineNumber + 1
          })
        }),
        on("Runtime.exceptionThrown", (params, sessionId) => {
          const targetId = sessionId === undefined ? undefined : targetOf.get(sessionId)
          if (targetId === undefined) return
          const details = params.exceptionDetails ?? {}
          tell("page_error", Math.round(params.timestamp ?? Date.now()), {
            target_id: targetId,
            message: text(details.exception?.description ?? details.text ?? "Uncaught error"),
            url: details.url ? redactUrl(bounded(details.url, MAX_LOG_TEXT)) : null,
            line: typeof details.lineNumber === "number" ? details.lineNumber + 1 : null,
            column: typeof details.columnNumber === "number" ? details.columnNumber + 1 : null
          })
        }),
        on("Target.detachedFromTarget", ({ sessionId }: { sessionId: string }) => {
          targetOf.delete(sessionId)
        }),
        egress.onRefused((refusal) => {
          refusals.set(refusal.host.toLowerCase(), refusal)
          tell("egress_refused", refusal.at, {
            host: text(refusal.host),
            port: refusal.port,
            reason: refusal.reason
          })
        })
      ]

      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          closed = true
          for (const undo of unlisten) undo()
          // What had not ended when the log stopped is told as it was.
          for (const key of [...pending.keys()]) finish(key, {})
          // The sessions are the follower's: only what the log turned on is turned off. Not waited for
          // (the end's path): each fails only when the page or the browser has gone.
          for (const sessionId of targetOf.keys()) {
            control.post("Network.disable", {}, sessionId)
            control.post("Runtime.disable", {}, sessionId)
          }
        })
      )

      // The pages open now, with their URLs now (a targetCreated comes for each one made from here on).
      yield* Effect.asVoid(
        Effect.ignore(
          targets.send("Target.setDiscoverTargets", { discover: true, filter: [{ type: "page" }] })
        )
      )
      const { targetInfos } = yield* targets
        .send<{ targetInfos: Array<TargetInfo> }>("Target.getTargets")
        .pipe(Effect.orElseSucceed(() => ({ targetInfos: [] as Array<TargetInfo> })))
      const now = Date.now()
      for (const info of targetInfos) found(info, now)
      // Each page held, those open now at once, every later one before it runs.
      yield* follower.follow(contextId, attached)
    })
})
