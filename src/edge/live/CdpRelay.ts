import { Effect, Option, Result } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { RAW } from "../guard/RawRoutes.ts"
import { CurrentOrigin } from "../../features/policy/AuthMiddleware.ts"
import { ACCOUNT_HEADER, Authenticator, originOf } from "../guard/Authenticator.ts"
import { connectToken } from "../guard/Credentials.ts"
import { InvalidRequest, SessionNotOpen, Unauthorized } from "../../kernel/Errors.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import type { BrowserRuntime } from "../../runtime/SessionRuntime.ts"
import { INTERNAL_PREFIX, SessionDoor } from "./SessionDoor.ts"
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
const relayToBrowser = (client: End, upstream: End, session: SessionConnection<BrowserRuntime>) =>
  Effect.gen(function* () {
    const outcome = yield* Effect.raceFirst(
      Effect.map(session.runtime.cdp.relay(client, upstream), (o) => ({ ...o })),
      Effect.map(session.ended, (reason) => ({ _tag: "SessionEnded" as const, reason }))
    )
    // The browser goes down right after a session ends: report the session's reason.
    const ended = yield* session.endedReason
    if (outcome._tag === "SessionEnded" || (outcome._tag === "UpstreamGone" && Option.isSome(ended))) {
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

/** What a CDP connect requires, from the route table. */
const CONNECT_ACCESS = RAW.cdp.access

/**
 * `GET /sessions/:id` (WebSocket): authenticates the key (header or
 * `?token=`), answers 401/404/409 before upgrading, waits for a `creating`
 * session to become ready (`Sessions.connect`), then relays frames to the
 * session's Chromium. When the session ends the client gets a close frame
 * with the reason.
 */
export const layer = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const door = yield* SessionDoor

    /** Dials Chromium for a session live here, upgrades the client and relays. */
    const toBrowser = (
      request: HttpServerRequest.HttpServerRequest,
      connection: SessionConnection<BrowserRuntime>
    ) =>
      Effect.gen(function* () {
        if (!isWebSocketUpgrade(request)) return errorResponse(new InvalidRequest())
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
        yield* relayToBrowser(client.value, upstream.value, connection)
        return HttpServerResponse.empty({ status: 101 })
      })

    const handler = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const id = (yield* HttpRouter.params).id ?? ""
        const principal = yield* authenticator.bearer(connectToken(request))
        if (Option.isNone(principal)) return errorResponse(new Unauthorized())
        if (!isWebSocketUpgrade(request)) return errorResponse(new InvalidRequest())
        const owner = yield* authenticator
          .authorize(principal.value, CONNECT_ACCESS, request.headers[ACCOUNT_HEADER])
          .pipe(Effect.result)
        if (Result.isFailure(owner)) return errorResponse(owner.failure)
        return yield* door.serve(request, { owner: owner.success, id, kind: CDP }, toBrowser).pipe(
          Effect.provideService(CurrentOrigin, originOf(request)),
          Effect.catch((error) => Effect.succeed(errorResponse(error)))
        )
      })

    yield* router.add("GET", "/sessions/:id", handler)
    yield* router.add("GET", `${INTERNAL_PREFIX}/sessions/:id`, door.internal(CDP, toBrowser))
  })
)
