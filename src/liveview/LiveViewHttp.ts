import { Clock, Effect, Option, Result } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { accept, dial, isWebSocketUpgrade, relayToNode, unreachable } from "../cdp/Splice.ts"
import { HOP_HEADER, NodeHop } from "../cluster/NodeHop.ts"
import { InvalidPreviewToken, InvalidRequest } from "../domain/Errors.ts"
import { systemOwner } from "../domain/Owner.ts"
import { errorResponse } from "../http/ErrorResponses.ts"
import { type PreviewClaims, PreviewTokens } from "../sessions/PreviewTokens.ts"
import { type SessionConnection, Sessions } from "../sessions/Sessions.ts"
import * as Viewer from "./Viewer.ts"

/** The hop's purpose for live-view streams. */
const PREVIEW = "preview"

const tokenOf = (request: HttpServerRequest.HttpServerRequest) =>
  new URL(request.url, "http://stream").searchParams.get("token") ?? ""

/**
 * `GET /sessions/:id/preview?token=...` (WebSocket), the `url` a preview
 * token comes with: the token is checked (signature, expiry, this session)
 * and the session must still be its account's and open; every refusal is an
 * HTTP error before the upgrade. On the session's node the stream is served
 * from its one screencast (`Viewer`); on another node it is relayed through
 * the node hop to the owner's `/internal/sessions/:id/preview`, which checks
 * the same token again.
 */
export const layer = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const sessions = yield* Sessions
    const tokens = yield* PreviewTokens
    const hop = yield* NodeHop

    const verify = (request: HttpServerRequest.HttpServerRequest, id: string) =>
      Effect.gen(function* () {
        const now = new Date(yield* Clock.currentTimeMillis)
        const claims = tokens.verify(tokenOf(request), now)
        if (Option.isNone(claims) || claims.value.sessionId !== id) return yield* new InvalidPreviewToken()
        return claims.value
      })

    const watch = (
      request: HttpServerRequest.HttpServerRequest,
      connection: SessionConnection,
      claims: PreviewClaims
    ) =>
      Effect.gen(function* () {
        const client = yield* accept(request, "viewer").pipe(Effect.option)
        if (Option.isNone(client)) return HttpServerResponse.empty({ status: 400 })
        yield* Effect.logDebug("liveview.connected", { sessionId: connection.sessionId })
        yield* Viewer.serve(client.value, connection, claims)
        return HttpServerResponse.empty({ status: 101 })
      })

    const handler = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const id = (yield* HttpRouter.params).id ?? ""
        const claims = yield* verify(request, id).pipe(Effect.result)
        if (Result.isFailure(claims)) return errorResponse(claims.failure)
        if (!isWebSocketUpgrade(request)) return errorResponse(new InvalidRequest())
        // The token speaks for its account: the session must still be that account's.
        const owner = systemOwner(claims.success.accountId)
        const where = yield* sessions.locate(owner, id).pipe(Effect.result)
        if (Result.isFailure(where)) return errorResponse(where.failure)
        if (where.success._tag === "Elsewhere") {
          const path = `/internal/sessions/${id}/preview?token=${encodeURIComponent(tokenOf(request))}`
          const target = yield* hop.target(where.success.nodeUrl, path, id, PREVIEW)
          const upstream = yield* dial(target.url, target.headers).pipe(Effect.result)
          if (Result.isFailure(upstream)) return unreachable(upstream.failure)
          const client = yield* accept(request, "viewer").pipe(Effect.option)
          if (Option.isNone(client)) return HttpServerResponse.empty({ status: 400 })
          yield* Effect.logDebug("liveview.connected", { sessionId: id, via: where.success.nodeUrl })
          yield* relayToNode(client.value, upstream.success)
          return HttpServerResponse.empty({ status: 101 })
        }
        const connection = yield* sessions.connect(owner, id, "viewer").pipe(Effect.result)
        if (Result.isFailure(connection)) return errorResponse(connection.failure)
        return yield* watch(request, connection.success, claims.success)
      }).pipe(Effect.scoped)

    /** The hop's end on the session's node: another node vouches for the hop, the token for the viewer. */
    const internal = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const id = (yield* HttpRouter.params).id ?? ""
        if (!(yield* hop.verify(request.headers[HOP_HEADER], id, PREVIEW))) {
          return errorResponse(new InvalidPreviewToken())
        }
        const claims = yield* verify(request, id).pipe(Effect.result)
        if (Result.isFailure(claims)) return errorResponse(claims.failure)
        if (!isWebSocketUpgrade(request)) return errorResponse(new InvalidRequest())
        const connection = yield* sessions.connectHere(id, "viewer").pipe(Effect.result)
        if (Result.isFailure(connection)) return errorResponse(connection.failure)
        return yield* watch(request, connection.success, claims.success)
      }).pipe(Effect.scoped)

    yield* router.add("GET", "/sessions/:id/preview", handler)
    yield* router.add("GET", "/internal/sessions/:id/preview", internal)
  })
)
