import { Context, Effect, Exit, Layer, Option, Result, Scope, Stream } from "effect"
import { HttpBody, HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { CurrentOrigin } from "../../features/policy/AuthMiddleware.ts"
import { accept, isWebSocketUpgrade, unreachable } from "./Ends.ts"
import { dial } from "../../platform/net/WebSocketEnds.ts"
import { relayToNode } from "../../platform/net/Splice.ts"
import { HOP_HEADER, NodeHop } from "./NodeHop.ts"
import { NodeDrain } from "../../platform/cluster/NodeDrain.ts"
import { Unauthorized, type SessionNotFound, type SessionTypeMismatch } from "../../kernel/Errors.ts"
import type { HttpError } from "../../kernel/ApiError.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import { forward } from "./DoorForward.ts"
import type {
  ConnectError,
  ConnectionKind,
  RuntimeFor,
  SessionConnection
} from "../../features/sessions/SessionConnections.ts"
import { Sessions } from "../../features/sessions/Sessions.ts"
import { sessionAttributes } from "../../platform/observability/Tracing.ts"

/** The prefix of the owner node's end of the hop: `/internal` + the route's own path. */
export const INTERNAL_PREFIX = "/internal"

/** The path parameters of the route (`id`, `cid`, ...), as the router read them. */
export type Params = Readonly<Record<string, string | undefined>>

/** What a route does with a session live on this node. */
export type Here<K extends ConnectionKind, E, R = never> = (
  request: HttpServerRequest.HttpServerRequest,
  connection: SessionConnection<RuntimeFor<K>>,
  owner: Owner,
  params: Params
) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, Scope.Scope | R>

/**
 * What a route does with what a session left on this node (a browser's
 * downloads), the session open or ended: there is no runtime to hold.
 */
export type Kept<E, R = never> = (
  request: HttpServerRequest.HttpServerRequest,
  sessionId: string,
  params: Params
) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

/** What `serve` is asked for: the session, the kind of connection, and the route's parameters. */
export interface DoorTarget<K extends ConnectionKind> {
  readonly owner: Owner
  readonly id: string
  readonly kind: K
  readonly params?: Params
  /** The twin route to relay to (default the request's own path and query under `/internal`). */
  readonly path?: string
  /** The body to relay, when the route has read the request's own already. */
  readonly body?: Uint8Array
  /** Relay every header but the hop-by-hop ones (the gateway: the program's own headers and cookies). */
  readonly allHeaders?: boolean
}

/**
 * Closes `scope` once the response has been sent: with its body for a
 * streamed body (an SSE stream, a download), at once otherwise.
 */
const holdUntilSent = (response: HttpServerResponse.HttpServerResponse, scope: Scope.Closeable) => {
  const body = response.body
  if (body._tag !== "Stream") return Effect.as(Scope.close(scope, Exit.void), response)
  return Effect.succeed(
    HttpServerResponse.setBody(
      response,
      HttpBody.stream(
        body.stream.pipe(Stream.ensuring(Scope.close(scope, Exit.void))),
        body.contentType,
        body.contentLength
      )
    )
  )
}

/**
 * The one door for every live connection to a session, whatever its kind:
 * CDP, the live view, PTYs, command streams, file transfer, the gateway.
 * `serve` finds the node that runs the session (`Sessions.locate`): here, it
 * connects (`Sessions.connect`: the kind, the lease) and runs the route's
 * `here`; elsewhere it relays the request to that node's `/internal` twin of
 * the route (the node hop), a WebSocket frame for frame, a plain request
 * with its body and answer streamed. `internal` is that twin: it takes the
 * hop's token instead of credentials and runs the same `here` for the owner
 * the relaying node vouched for.
 */
export class SessionDoor extends Context.Service<
  SessionDoor,
  {
    readonly serve: <K extends ConnectionKind, E, R = never>(
      request: HttpServerRequest.HttpServerRequest,
      target: DoorTarget<K>,
      here: Here<K, E, R>
    ) => Effect.Effect<HttpServerResponse.HttpServerResponse, E | SessionNotFound | ConnectError<K>, R>
    readonly internal: <K extends ConnectionKind, E extends HttpError, R = never>(
      kind: K,
      here: Here<K, E, R>
    ) => (
      request: HttpServerRequest.HttpServerRequest
    ) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpRouter.RouteContext | R>
    /**
     * `serve` for what a session left on the node that ran it, open or ended
     * (`Sessions.locateKept`): here it runs `here`, elsewhere it relays to the
     * twin route (`internalKept`) through the same hop.
     */
    readonly serveKept: <K extends ConnectionKind, E, R = never>(
      request: HttpServerRequest.HttpServerRequest,
      target: DoorTarget<K>,
      here: Kept<E, R>
    ) => Effect.Effect<HttpServerResponse.HttpServerResponse, E | SessionNotFound | SessionTypeMismatch, R>
    readonly internalKept: <E extends HttpError, R = never>(
      kind: ConnectionKind,
      here: Kept<E, R>
    ) => (
      request: HttpServerRequest.HttpServerRequest
    ) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpRouter.RouteContext | R>
  }
>()("rbs/sessions/SessionDoor") {
  static readonly layer = Layer.effect(
    SessionDoor,
    Effect.gen(function* () {
      const sessions = yield* Sessions
      const hop = yield* NodeHop
      const drain = yield* NodeDrain

      const serve = <K extends ConnectionKind, E, R = never>(
        request: HttpServerRequest.HttpServerRequest,
        target: DoorTarget<K>,
        here: Here<K, E, R>
      ) =>
        Effect.gen(function* () {
          const { owner, id, kind } = target
          yield* Effect.annotateCurrentSpan({
            ...sessionAttributes(id, owner.accountId),
            "rbs.connection.kind": kind
          })
          const where = yield* sessions.locate(owner, id, kind)
          if (where._tag === "Elsewhere") {
            const origin = yield* CurrentOrigin
            const path = `${INTERNAL_PREFIX}${target.path ?? request.url}`
            if (isWebSocketUpgrade(request)) {
              return yield* Effect.scoped(
                Effect.gen(function* () {
                  const to = yield* hop.target(where.nodeUrl, path, id, kind, { owner, origin })
                  const upstream = yield* dial(to.url, to.headers).pipe(Effect.result)
                  if (Result.isFailure(upstream)) {
                    yield* Effect.logWarning("session.hop_failed", {
                      sessionId: id,
                      sessionNode: where.nodeUrl,
                      error: String(upstream.failure)
                    })
                    return unreachable(upstream.failure)
                  }
                  const client = yield* accept(request).pipe(Effect.option)
                  if (Option.isNone(client)) return HttpServerResponse.empty({ status: 400 })
                  yield* Effect.logDebug("session.connected", { sessionId: id, kind, via: where.nodeUrl })
                  yield* drain.relaying(relayToNode(client.value, upstream.success))
                  return HttpServerResponse.empty({ status: 101 })
                })
              )
            }
            const to = yield* hop.request(where.nodeUrl, request.method, path, id, kind, { owner, origin })
            return yield* forward(request, to.url, to.headers, target.body, target.allHeaders)
          }
          const scope = yield* Scope.make()
          const response = yield* Effect.gen(function* () {
            const connection = yield* sessions.connectLocated(owner, id, kind)
            return yield* here(request, connection, owner, target.params ?? { id })
          }).pipe(
            Scope.provide(scope),
            Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit)))
          )
          return yield* holdUntilSent(response, scope)
        })

      const internal =
        <K extends ConnectionKind, E extends HttpError, R = never>(kind: K, here: Here<K, E, R>) =>
        (request: HttpServerRequest.HttpServerRequest) =>
          Effect.gen(function* () {
            const params = yield* HttpRouter.params
            const id = params.id ?? ""
            const opened = yield* hop.open(request.headers[HOP_HEADER], id, kind, request)
            if (Option.isNone(opened) || Option.isNone(opened.value.vouched)) {
              return errorResponse(new Unauthorized())
            }
            const { owner, origin } = opened.value.vouched.value
            const scope = yield* Scope.make()
            const response = yield* Effect.gen(function* () {
              const connection = yield* sessions.connectHere(id, kind)
              return yield* here(request, connection, owner, params)
            }).pipe(
              Scope.provide(scope),
              Effect.provideService(CurrentOrigin, origin),
              Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit))),
              Effect.result
            )
            if (Result.isFailure(response)) return errorResponse(response.failure)
            return yield* holdUntilSent(response.success, scope)
          })

      const serveKept = <K extends ConnectionKind, E, R = never>(
        request: HttpServerRequest.HttpServerRequest,
        target: DoorTarget<K>,
        here: Kept<E, R>
      ) =>
        Effect.gen(function* () {
          const { owner, id, kind } = target
          const where = yield* sessions.locateKept(owner, id, kind)
          if (where._tag === "Here") return yield* here(request, id, target.params ?? { id })
          const origin = yield* CurrentOrigin
          const path = `${INTERNAL_PREFIX}${target.path ?? request.url}`
          const to = yield* hop.request(where.nodeUrl, request.method, path, id, kind, { owner, origin })
          return yield* forward(request, to.url, to.headers, target.body, target.allHeaders)
        })

      const internalKept =
        <E extends HttpError, R = never>(kind: ConnectionKind, here: Kept<E, R>) =>
        (request: HttpServerRequest.HttpServerRequest) =>
          Effect.gen(function* () {
            const params = yield* HttpRouter.params
            const id = params.id ?? ""
            const opened = yield* hop.open(request.headers[HOP_HEADER], id, kind, request)
            if (Option.isNone(opened)) return errorResponse(new Unauthorized())
            const response = yield* here(request, id, params).pipe(Effect.result)
            return Result.isFailure(response) ? errorResponse(response.failure) : response.success
          })

      return SessionDoor.of({ serve, internal, serveKept, internalKept })
    })
  )
}
