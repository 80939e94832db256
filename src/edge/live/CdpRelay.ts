import { Effect, Option } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { RAW } from "../guard/RawRoutes.ts"
import type { Access } from "../../features/policy/Access.ts"
import { CurrentOrigin } from "../../features/policy/AuthMiddleware.ts"
import { Authenticator, originOf } from "../guard/Authenticator.ts"
import { InvalidRequest, SessionNotOpen, TargetNotFound } from "../../kernel/Errors.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import type { BrowserRuntime } from "../../runtime/SessionRuntime.ts"
import type { Outcome as SpliceOutcome } from "../../platform/net/Splice.ts"
import { cdpCaller } from "./CdpCaller.ts"
import { ConnectTokens } from "./ConnectTokens.ts"
import { type Here, INTERNAL_PREFIX, type Params, SessionDoor } from "./SessionDoor.ts"
import type { SessionConnection } from "../../features/sessions/Sessions.ts"
import { accept, isWebSocketUpgrade } from "./Ends.ts"
import { dial, type End, hangUp } from "../../platform/net/WebSocketEnds.ts"

/** The hop's purpose for CDP connections (the live view has its own). */
const CDP = "cdp" as const

/**
 * A client to the session's Chromium, on the node that runs it: the client's
 * frames pass the guard (and, for a context session, the connection is
 * scoped to the session's context), and the client is told with a close
 * frame why it was hung up.
 */
const relayToBrowser = (
  client: End,
  upstream: End,
  session: SessionConnection<BrowserRuntime>,
  relay: (client: End, upstream: End) => Effect.Effect<SpliceOutcome>
) =>
  Effect.gen(function* () {
    const outcome = yield* Effect.raceFirst(
      Effect.map(relay(client, upstream), (o) => ({ ...o })),
      Effect.map(session.ended, (reason) => ({ _tag: "SessionEnded" as const, reason }))
    )
    // The browser (or a page client's page) goes down right after a session ends: report the session's reason.
    const ended = yield* session.endedReason
    const gone = outcome._tag === "UpstreamGone" || outcome._tag === "ScopeEnded"
    if (outcome._tag === "SessionEnded" || (gone && Option.isSome(ended))) {
      const reason = outcome._tag === "SessionEnded" ? outcome.reason : Option.getOrThrow(ended)
      return yield* hangUp(client.ws, 1000, `session ended: ${reason}`)
    }
    switch (outcome._tag) {
      case "UpstreamGone":
        return yield* hangUp(client.ws, 1011, "browser disconnected")
      case "HangUpRequested":
        return yield* hangUp(client.ws, 1000, "Browser.close: the session stays open until DELETE")
      case "ScopeEnded":
        return yield* hangUp(client.ws, 1000, outcome.reason)
      case "ClientGone":
        return yield* hangUp(client.ws, 1000, "")
    }
  })

/**
 * `GET /sessions/:id` (WebSocket): authenticates the key (header or
 * `?token=`), answers 401/404/409 before upgrading, waits for a `creating`
 * session to become ready (`Sessions.connect`), then relays frames to the
 * session's Chromium. When the session ends the client gets a close frame
 * with the reason. `GET /sessions/:id/devtools/page/:target_id` is the same
 * for one of the session's pages (a page's `webSocketDebuggerUrl` in
 * DevTools discovery): the same checks, lease and ends, and 404 before
 * upgrading for a target that is not one of them.
 */
export const layer = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const connectTokens = yield* ConnectTokens
    const door = yield* SessionDoor

    /** Dials Chromium for a session live here, upgrades the client and relays it with `relay`. */
    const relayed = (
      request: HttpServerRequest.HttpServerRequest,
      connection: SessionConnection<BrowserRuntime>,
      relay: (client: End, upstream: End) => Effect.Effect<SpliceOutcome>
    ) =>
      Effect.gen(function* () {
        if (!isWebSocketUpgrade(request)) return errorResponse(new InvalidRequest())
        const admits = connection.runtime.cdp.admits
        if (admits !== undefined && !(yield* admits)) return errorResponse(new SessionNotOpen())
        const spare = connection.runtime.cdp.takeUpstream?.()
        if (spare !== undefined) yield* Effect.addFinalizer(() => Effect.sync(() => spare.ws.terminate()))
        const upstream =
          spare !== undefined
            ? Option.some(spare)
            : yield* dial(connection.runtime.cdp.endpoint).pipe(
                Effect.tapError((error) =>
                  Effect.logWarning("cdp.dial_failed", {
                    sessionId: connection.sessionId,
                    error: String(error)
                  })
                ),
                Effect.option
              )
        if (Option.isNone(upstream)) return errorResponse(new SessionNotOpen())
        const client = yield* accept(request).pipe(Effect.option)
        if (Option.isNone(client)) return HttpServerResponse.empty({ status: 400 })
        yield* Effect.logDebug("cdp.connected", { sessionId: connection.sessionId })
        yield* relayToBrowser(client.value, upstream.value, connection, relay)
        return HttpServerResponse.empty({ status: 101 })
      })

    const toBrowser = (
      request: HttpServerRequest.HttpServerRequest,
      connection: SessionConnection<BrowserRuntime>
    ) => relayed(request, connection, connection.runtime.cdp.relay)

    /** The page's relay, once the session's own list of pages (its context's) has it. */
    const toPage = (
      request: HttpServerRequest.HttpServerRequest,
      connection: SessionConnection<BrowserRuntime>,
      _owner: Owner,
      params: Params
    ) =>
      Effect.gen(function* () {
        const targetId = params.target_id ?? ""
        const pages = yield* connection.runtime.cdp.pages.pipe(
          Effect.tapError((error) =>
            Effect.logWarning("cdp.pages_failed", { sessionId: connection.sessionId, error: error.message })
          ),
          Effect.option
        )
        if (Option.isNone(pages)) return errorResponse(new SessionNotOpen())
        if (!pages.value.some((page) => page.targetId === targetId))
          return errorResponse(new TargetNotFound())
        return yield* relayed(request, connection, (client, upstream) =>
          connection.runtime.cdp.relayPage(client, upstream, targetId)
        )
      })

    /** A CDP route: its caller as the CDP connect takes it, then the session's door, here or on its node. */
    const connect =
      (access: Access, here: Here<typeof CDP, never>) => (request: HttpServerRequest.HttpServerRequest) =>
        Effect.gen(function* () {
          const params = yield* HttpRouter.params
          const owner = yield* cdpCaller(authenticator, connectTokens, request, params.id ?? "", access, true)
          return yield* door.serve(request, { owner, id: params.id ?? "", kind: CDP, params }, here)
        }).pipe(
          Effect.provideService(CurrentOrigin, originOf(request)),
          Effect.catch((error) => Effect.succeed(errorResponse(error)))
        )

    yield* router.add("GET", "/sessions/:id", connect(RAW.cdp.access, toBrowser))
    yield* router.add("GET", `${INTERNAL_PREFIX}/sessions/:id`, door.internal(CDP, toBrowser))
    yield* router.add("GET", "/sessions/:id/devtools/page/:target_id", connect(RAW.cdpPage.access, toPage))
    yield* router.add(
      "GET",
      `${INTERNAL_PREFIX}/sessions/:id/devtools/page/:target_id`,
      door.internal(CDP, toPage)
    )
  })
)
