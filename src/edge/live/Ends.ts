import { NodeHttpServerRequest } from "@effect/platform-node"
import { Data, Effect } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import type { IncomingMessage } from "node:http"
import type { Socket as NetSocket } from "node:net"
import WebSocket, { WebSocketServer } from "ws"
import { SessionNotOpen } from "../../kernel/Errors.ts"
import { errorResponse } from "../http/ErrorResponses.ts"

// The two ends of a relayed WebSocket: the client's (the request's own
// connection, upgraded) and the upstream's (Chromium, or the owner node
// through the hop), for the CDP relay, the live view and the PTY.

/** Frames are large: a full-page screenshot answers in 16 MB or more of base64. */
const MAX_FRAME = 512 * 1024 * 1024
/** How long a client gets to answer our close frame before its socket is cut. */
const CLOSE_GRACE_MS = 2_000

export const isWebSocketUpgrade = (request: HttpServerRequest.HttpServerRequest) =>
  request.headers.upgrade?.toLowerCase() === "websocket"

/** A `ws` socket and the TCP connection under it. */
export interface End {
  readonly ws: WebSocket
  readonly socket: NetSocket
}

/**
 * The upstream answered the upgrade with an HTTP response instead (another
 * node refusing a relayed connection: 404, 409, 429): the client gets the
 * same status and body.
 */
export class UpstreamRefused extends Data.TaggedError("UpstreamRefused")<{
  readonly status: number
  readonly body: string
}> {}

/**
 * What the client hears when the upstream could not be reached: the owner
 * node's own refusal as it gave it, or 409 `session_not_open` (the browser or
 * the node went away meanwhile).
 */
export const unreachable = (error: Error | UpstreamRefused) =>
  error instanceof UpstreamRefused
    ? HttpServerResponse.text(error.body, { status: error.status, contentType: "application/json" })
    : errorResponse(new SessionNotOpen())

/** The most of a refusal's body passed on (an error body is a few hundred bytes). */
const REFUSAL_BODY_LIMIT = 16 * 1024

/**
 * Chromium's end of the relay, or the owner node's through the hop. Never
 * given the client's Origin or Host (Chromium answers 403/500 to those). Its
 * frames carry a zero mask, which leaves the payload as it is (masking guards
 * proxies on the open internet; this connection is on loopback or the
 * cluster's network), so a client's frame is passed on uncopied.
 */
export const dial = (endpoint: string, headers: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.callback<End, Error | UpstreamRefused>((resume) => {
      let socket: NetSocket | undefined
      const ws = new WebSocket(endpoint, {
        headers,
        perMessageDeflate: false,
        maxPayload: MAX_FRAME,
        // The client's own WebSocket checks the text it receives.
        skipUTF8Validation: true,
        generateMask: (mask) => mask.fill(0)
      })
      ws.once("upgrade", (response) => (socket = response.socket as NetSocket))
      ws.once("open", () => resume(Effect.succeed({ ws, socket: socket! })))
      ws.once("error", (error) => resume(Effect.fail(error)))
      ws.once("unexpected-response", (request, response) => {
        let body = ""
        response.setEncoding("utf8")
        response.on("data", (chunk: string) => {
          if (body.length < REFUSAL_BODY_LIMIT) body += chunk
        })
        response.once("end", () => {
          request.destroy()
          resume(Effect.fail(new UpstreamRefused({ status: response.statusCode ?? 502, body })))
        })
        response.once("error", () => resume(Effect.fail(new Error("upstream refused the upgrade"))))
      })
    }),
    (end) => Effect.sync(() => end.ws.terminate())
  )

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
  maxPayload: MAX_FRAME,
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

/** Completes once the socket has closed. */
export const waitClosed = (ws: WebSocket) =>
  Effect.callback<void>((resume) => {
    if (ws.readyState === WebSocket.CLOSED) return resume(Effect.void)
    const onClose = () => resume(Effect.void)
    ws.once("close", onClose)
    return Effect.sync(() => ws.off("close", onClose))
  })

/** Sends a close frame unless one was sent, waits briefly for the client's, then cuts the socket. */
export const hangUp = (ws: WebSocket, code: number, reason: string) =>
  Effect.sync(() => {
    if (ws.readyState === WebSocket.OPEN) ws.close(code, reason)
  }).pipe(
    Effect.andThen(waitClosed(ws).pipe(Effect.timeoutOption(CLOSE_GRACE_MS))),
    Effect.ensuring(Effect.sync(() => ws.terminate()))
  )

/**
 * Upgrades the request's own connection (`viewer`: a live-view viewer, whose
 * messages are small input events).
 */
export const accept = (request: HttpServerRequest.HttpServerRequest, kind: "relay" | "viewer" = "relay") =>
  Effect.acquireRelease(
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
        resume(Effect.succeed({ ws, socket }))
      })
    }),
    // Reached with the socket still open only when the relay is interrupted (the service stopping).
    (end) => hangUp(end.ws, 1001, "the service is stopping")
  )
