import { Clock, Effect, Option } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { accept, isWebSocketUpgrade } from "./Ends.ts"
import { InvalidPreviewToken, InvalidRequest } from "../../kernel/Errors.ts"
import { systemOwner } from "../../kernel/Owner.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import type { BrowserRuntime } from "../../runtime/SessionRuntime.ts"
import { PreviewTokens } from "../../features/sessions/PreviewTokens.ts"
import { INTERNAL_PREFIX, SessionDoor } from "./SessionDoor.ts"
import type { SessionConnection } from "../../features/sessions/Sessions.ts"
import * as Viewer from "./Viewer.ts"

/** What a live-view stream is to its session (and the hop's purpose for it). */
const VIEWER = "viewer" as const

const tokenOf = (request: HttpServerRequest.HttpServerRequest) =>
  new URL(request.url, "http://stream").searchParams.get("token") ?? ""

/**
 * `GET /sessions/:id/preview?token=...` (WebSocket), the `url` a preview
 * token comes with: the token is checked (signature, expiry, this session)
 * and the session must still be its account's and open; every refusal is an
 * HTTP error before the upgrade. The stream is served from the session's one
 * screencast (`Viewer`) on its node, through the session door (the node hop
 * from any other node, whose twin route checks the same token again).
 */
export const layer = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const tokens = yield* PreviewTokens
    const door = yield* SessionDoor

    const verify = (request: HttpServerRequest.HttpServerRequest, id: string) =>
      Effect.gen(function* () {
        const now = new Date(yield* Clock.currentTimeMillis)
        const claims = tokens.verify(tokenOf(request), now)
        if (Option.isNone(claims) || claims.value.sessionId !== id) return yield* new InvalidPreviewToken()
        return claims.value
      })

    const watch = (
      request: HttpServerRequest.HttpServerRequest,
      connection: SessionConnection<BrowserRuntime>
    ) =>
      Effect.gen(function* () {
        const claims = yield* verify(request, connection.sessionId)
        if (!isWebSocketUpgrade(request)) return errorResponse(new InvalidRequest())
        const client = yield* accept(request, "viewer").pipe(Effect.option)
        if (Option.isNone(client)) return HttpServerResponse.empty({ status: 400 })
        yield* Effect.logDebug("liveview.connected", { sessionId: connection.sessionId })
        yield* Viewer.serve(client.value, connection, claims)
        return HttpServerResponse.empty({ status: 101 })
      })

    const handler = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const id = (yield* HttpRouter.params).id ?? ""
        const claims = yield* verify(request, id)
        if (!isWebSocketUpgrade(request)) return yield* new InvalidRequest()
        // The token speaks for its account: the session must still be that account's.
        return yield* door.serve(request, { owner: systemOwner(claims.accountId), id, kind: VIEWER }, watch)
      }).pipe(Effect.catch((error) => Effect.succeed(errorResponse(error))))

    yield* router.add("GET", "/sessions/:id/preview", handler)
    yield* router.add("GET", `${INTERNAL_PREFIX}/sessions/:id/preview`, door.internal(VIEWER, watch))
  })
)
