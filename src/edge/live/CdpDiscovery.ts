import { DateTime, Duration, Effect, Option } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Access } from "../../features/policy/Access.ts"
import { CurrentOrigin } from "../../features/policy/AuthMiddleware.ts"
import type { SessionConnection } from "../../features/sessions/Sessions.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { SessionNotOpen } from "../../kernel/Errors.ts"
import type { BrowserVersion, CdpError, TargetInfo } from "../../platform/cdp/CdpClient.ts"
import { PublicUrls } from "../../platform/config/Config.ts"
import type { BrowserRuntime } from "../../runtime/SessionRuntime.ts"
import { Authenticator, originOf, refOf } from "../guard/Authenticator.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import { RAW } from "../guard/RawRoutes.ts"
import { cdpCaller } from "./CdpCaller.ts"
import { CONNECT_TOKEN_PREFIX, CONNECT_TOKEN_TTL, ConnectTokens } from "./ConnectTokens.ts"
import { INTERNAL_PREFIX, SessionDoor } from "./SessionDoor.ts"

/** The hop's purpose for discovery: the browser's facts and pages, read; no connection held. */
const DISCOVERY = "discovery" as const

/**
 * The query the answer's URLs carry: for a request that came with `?token=`
 * (a client that can pass a credential only in the URL: chrome-remote-
 * interface, playwright given `http://...?token=`), a connect token of this
 * session for the caller (or the connect token it came with), so the client
 * connects with what it discovered as it is while a URL it prints or logs
 * opens this one session for 15 minutes, never the key. A request with the
 * header gets URLs without a credential (its client sends the header again).
 */
const tokenQuery = (
  connectTokens: ConnectTokens["Service"],
  request: HttpServerRequest.HttpServerRequest,
  owner: Owner,
  sessionId: string
) =>
  Effect.gen(function* () {
    const given = new URL(request.url, "http://discovery").searchParams.get("token")
    if (given === null) return ""
    if (given.startsWith(CONNECT_TOKEN_PREFIX)) return `?${new URLSearchParams({ token: given })}`
    const ref = refOf(owner.principal)
    if (ref === undefined) return ""
    const now = yield* DateTime.nowAsDate
    const token = connectTokens.sign({
      sessionId,
      accountId: owner.accountId,
      principal: ref,
      issuedAt: now,
      expiresAt: new Date(now.getTime() + Duration.toMillis(CONNECT_TOKEN_TTL))
    })
    return `?${new URLSearchParams({ token })}`
  })

/** Chromium's `/json/version` of the session's browser, its WebSocket the relay's. */
export const versionOf = (version: BrowserVersion, webSocketDebuggerUrl: string) => ({
  Browser: version.product,
  "Protocol-Version": version.protocolVersion,
  "User-Agent": version.userAgent,
  "V8-Version": version.jsVersion,
  // As Chromium writes it: WebKit's version, frozen at its user agent's 537.36, and the revision built.
  "WebKit-Version": `537.36 (${version.revision})`,
  webSocketDebuggerUrl
})

/** A page as Chromium's `/json/list` lists it, its WebSocket the page relay (no DevTools front end: it has no key). */
export const pageOf = (page: TargetInfo, cdpUrl: string, query: string) => ({
  description: "",
  id: page.targetId,
  title: page.title,
  type: "page",
  url: page.url,
  webSocketDebuggerUrl: `${cdpUrl}/devtools/page/${encodeURIComponent(page.targetId)}${query}`
})

/**
 * `GET /sessions/:id/json/version`, `/json/list` and `/json` (a trailing
 * slash is the same route): Chromium's DevTools discovery for the session's
 * browser, its URLs the relay's, for CDP clients that start from an HTTP
 * URL. The caller is checked as the CDP connect checks it, and the answer
 * comes from the live browser, on the node that runs it (the door, and its
 * node hop from any other), over the session's own control connection.
 */
export const layer = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const connectTokens = yield* ConnectTokens
    const door = yield* SessionDoor
    const urls = yield* PublicUrls

    const cdpUrlOf = (id: string) => `${urls.cdpBase}/sessions/${id}`

    /** What the browser answered, as `body` writes it; 409 `session_not_open` when it gives none (it is going). */
    const answered = <A>(
      connection: SessionConnection<BrowserRuntime>,
      read: Effect.Effect<A, CdpError>,
      body: (read: A) => unknown
    ) =>
      Effect.gen(function* () {
        const result = yield* read.pipe(
          Effect.tapError((error) =>
            Effect.logWarning("cdp.discovery_failed", {
              sessionId: connection.sessionId,
              error: error.message
            })
          ),
          Effect.option
        )
        if (Option.isNone(result)) return errorResponse(new SessionNotOpen())
        // Never kept by a cache between: the pages change, and the URLs may carry a connect token.
        return HttpServerResponse.jsonUnsafe(body(result.value), { headers: { "cache-control": "no-store" } })
      })

    const version = (
      request: HttpServerRequest.HttpServerRequest,
      connection: SessionConnection<BrowserRuntime>,
      owner: Owner
    ) =>
      Effect.flatMap(tokenQuery(connectTokens, request, owner, connection.sessionId), (query) =>
        answered(connection, connection.runtime.cdp.version, (read) =>
          versionOf(read, `${cdpUrlOf(connection.sessionId)}${query}`)
        )
      )

    const list = (
      request: HttpServerRequest.HttpServerRequest,
      connection: SessionConnection<BrowserRuntime>,
      owner: Owner
    ) =>
      Effect.flatMap(tokenQuery(connectTokens, request, owner, connection.sessionId), (query) =>
        answered(connection, connection.runtime.cdp.pages, (pages) =>
          pages.map((page) => pageOf(page, cdpUrlOf(connection.sessionId), query))
        )
      )

    const discover =
      (access: Access, here: typeof version) => (request: HttpServerRequest.HttpServerRequest) =>
        Effect.gen(function* () {
          const id = (yield* HttpRouter.params).id ?? ""
          const owner = yield* cdpCaller(authenticator, connectTokens, request, id, access, false)
          return yield* door.serve(request, { owner, id, kind: DISCOVERY }, here)
        }).pipe(
          Effect.provideService(CurrentOrigin, originOf(request)),
          Effect.catch((error) => Effect.succeed(errorResponse(error)))
        )

    const routes = [
      ["/sessions/:id/json/version", RAW.cdpVersion.access, version],
      ["/sessions/:id/json/list", RAW.cdpList.access, list],
      ["/sessions/:id/json", RAW.cdpJson.access, list]
    ] as const
    for (const [path, access, here] of routes) {
      yield* router.add("GET", path, discover(access, here))
      yield* router.add("GET", `${INTERNAL_PREFIX}${path}`, door.internal(DISCOVERY, here))
    }
  })
)
