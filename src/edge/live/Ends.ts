import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Effect, Metric } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import type { IncomingMessage } from "node:http"
import type { Socket as NetSocket } from "node:net"
import { WebSocketServer } from "ws"
import { SessionNotOpen } from "../../kernel/Errors.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import { CLIENT_MAX_MESSAGE, type End, hangUp, UpstreamRefused } from "../../platform/net/WebSocketEnds.ts"

// The two ends of a relayed WebSocket: the client's (the request's own
// connection, upgraded) and the upstream's (Chromium, or the owner node
// through the hop), for the CDP relay, the live view and the PTY.

export const isWebSocketUpgrade = (request: HttpServerRequest.HttpServerRequest) =>
  request.headers.upgrade?.toLowerCase() === "websocket"

/**
 * What the client hears when the upstream could not be reached: the owner
 * node's own refusal as it gave it, or 409 `session_not_open` (the browser or
 * the node went away meanwhile).
 */
export const unreachable = (error: Error | UpstreamRefused) =>
  error instanceof UpstreamRefused
    ? HttpServerResponse.text(error.body, { status: error.status, contentType: "application/json" })
    : errorResponse(new SessionNotOpen())

/**
 * The client's end: a `ws` socket on the request's own connection, so frames
 * pass between the two `ws` sockets as the Buffers `ws` read them in, with no
 * decoding, copying or queueing per frame. (Effect's `request.upgrade` wraps
 * the socket in a pull-based `Socket` that would cost a fiber hop each way.)
 * The handler returns only once this connection is closed, so the server
 * never writes an HTTP response onto it.
 */
const clientServer = new WebSocketServer({
  noServer: true,
  perMessageDeflate: false,
  maxPayload: CLIENT_MAX_MESSAGE,
  clientTracking: false
})

/** Live-view viewers send only small input messages: a larger one closes the stream (1009). */
const VIEWER_MAX_MESSAGE = 1024 * 1024
const viewerServer = new WebSocketServer({
  noServer: true,
  perMessageDeflate: false,
  maxPayload: VIEWER_MAX_MESSAGE,
  clientTracking: false
})

const NO_HEAD = Buffer.alloc(0)

export const relayRefused = Metric.counter("rbs_relay_messages_refused_total", {
  description:
    "Client WebSocket messages the relay closed the connection on (1009) as their header arrived, by reason (too_large)"
})

/** `ws` names a message past `maxPayload` so; it has closed the connection 1009 and read no more of it. */
const TOO_LARGE = "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH"

/**
 * Upgrades the request's own connection (`viewer`: a live-view viewer, whose
 * messages are small input events).
 */
export const accept = (request: HttpServerRequest.HttpServerRequest, kind: "relay" | "viewer" = "relay") =>
  Effect.acquireRelease(
    Effect.flatMap(Effect.context<never>(), (services) =>
      Effect.callback<End, SessionNotOpen>((resume) => {
        const incoming = NodeHttpServerRequest.toIncomingMessage(request) as IncomingMessage
        const socket = incoming.socket as NetSocket
        const refused = () => resume(Effect.fail(new SessionNotOpen()))
        if (socket.destroyed) return refused()
        // A handshake `ws` refuses (bad key or version) is answered 400 and the socket closed.
        socket.once("close", refused)
        const server = kind === "viewer" ? viewerServer : clientServer
        server.handleUpgrade(incoming, socket, NO_HEAD, (ws) => {
          socket.off("close", refused)
          ws.on("error", (error: Error & { code?: string }) => {
            if (error.code === TOO_LARGE)
              Metric.withAttributes(relayRefused, { reason: "too_large" }).updateUnsafe(1, services)
          })
          resume(Effect.succeed({ ws, socket }))
        })
      })
    ),
    // Reached with the socket still open only when the relay is interrupted (the service stopping).
    (end) => hangUp(end.ws, 1001, "the service is stopping")
  )
