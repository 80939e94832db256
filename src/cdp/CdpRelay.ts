import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect, Option, Result } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { IncomingMessage } from "node:http"
import type { Socket as NetSocket } from "node:net"
import WebSocket, { WebSocketServer } from "ws"
import { RAW_ROUTES } from "../auth/Access.ts"
import { CurrentOrigin } from "../auth/AuthMiddleware.ts"
import { ACCOUNT_HEADER, Authenticator, originOf } from "../auth/AuthMiddlewareLive.ts"
import { connectToken } from "../auth/Credentials.ts"
import * as CdpGuard from "./CdpGuard.ts"
import { InvalidRequest, SessionNotOpen, Unauthorized } from "../domain/Errors.ts"
import { errorResponse } from "../http/ErrorResponses.ts"
import { type SessionConnection, Sessions } from "../sessions/Sessions.ts"

/** Frames are large: a full-page screenshot answers in 16 MB or more of base64. */
const MAX_FRAME = 512 * 1024 * 1024
/** Bytes queued towards a slow reader before the other side stops being read. */
const HIGH_WATER = 8 * 1024 * 1024
/** How long a client gets to answer our close frame before its socket is cut. */
const CLOSE_GRACE_MS = 2_000

const isWebSocketUpgrade = (request: HttpServerRequest.HttpServerRequest) =>
  request.headers.upgrade?.toLowerCase() === "websocket"

/** A `ws` socket and the TCP connection under it. */
interface End {
  readonly ws: WebSocket
  readonly socket: NetSocket
}

/**
 * Chromium's end of the relay. Never given the client's Origin or Host (it
 * answers 403/500 to those). Its frames carry a zero mask, which leaves the
 * payload as it is (masking guards proxies on the open internet; this
 * connection is on loopback), so a client's frame is passed on uncopied.
 */
const dial = (endpoint: string) =>
  Effect.acquireRelease(
    Effect.callback<End, Error>((resume) => {
      let socket: NetSocket | undefined
      const ws = new WebSocket(endpoint, {
        perMessageDeflate: false,
        maxPayload: MAX_FRAME,
        // The client's own WebSocket checks the text it receives.
        skipUTF8Validation: true,
        generateMask: (mask) => mask.fill(0)
      })
      ws.once("upgrade", (response) => (socket = response.socket as NetSocket))
      ws.once("open", () => resume(Effect.succeed({ ws, socket: socket! })))
      ws.once("error", (error) => resume(Effect.fail(error)))
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

const NO_HEAD = Buffer.alloc(0)

const waitClosed = (ws: WebSocket) =>
  Effect.callback<void>((resume) => {
    if (ws.readyState === WebSocket.CLOSED) return resume(Effect.void)
    const onClose = () => resume(Effect.void)
    ws.once("close", onClose)
    return Effect.sync(() => ws.off("close", onClose))
  })

/** Sends a close frame unless one was sent, waits briefly for the client's, then cuts the socket. */
const hangUp = (ws: WebSocket, code: number, reason: string) =>
  Effect.sync(() => {
    if (ws.readyState === WebSocket.OPEN) ws.close(code, reason)
  }).pipe(
    Effect.andThen(waitClosed(ws).pipe(Effect.timeoutOption(CLOSE_GRACE_MS))),
    Effect.ensuring(Effect.sync(() => ws.terminate()))
  )

const accept = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.acquireRelease(
    Effect.callback<End, SessionNotOpen>((resume) => {
      const incoming = NodeHttpServerRequest.toIncomingMessage(request) as IncomingMessage
      const socket = incoming.socket as NetSocket
      const refused = () => resume(Effect.fail(new SessionNotOpen()))
      if (socket.destroyed) return refused()
      // A handshake `ws` refuses (bad key or version) is answered 400 and the socket closed.
      socket.once("close", refused)
      clientServer.handleUpgrade(incoming, socket, NO_HEAD, (ws) => {
        socket.off("close", refused)
        resume(Effect.succeed({ ws, socket }))
      })
    }),
    // Reached with the socket still open only when the relay is interrupted (the service stopping).
    (end) => hangUp(end.ws, 1001, "the service is stopping")
  )

type Outcome =
  | { readonly _tag: "SessionEnded"; readonly reason: string }
  | { readonly _tag: "BrowserGone" }
  | { readonly _tag: "BrowserCloseRequested" }
  | { readonly _tag: "ClientGone" }

/**
 * Sends `data` on `to`. When `to` has more than HIGH_WATER bytes queued,
 * `from` is not read until this frame is written.
 */
const forward = (from: End, to: End, data: Buffer | string, binary: boolean) => {
  if (to.ws.readyState !== WebSocket.OPEN) return
  if (to.ws.bufferedAmount < HIGH_WATER) return to.ws.send(data, { binary })
  from.ws.pause()
  to.ws.send(data, { binary }, () => from.ws.resume())
}

/**
 * Frames that arrive together leave together: `ws` handles each chunk read
 * from `from`'s connection at once, frame by frame, and `to` is corked around
 * it, so the frames of one read go out in one write instead of one each.
 */
const batchWrites = (from: End, to: End) => {
  const cork = () => to.socket.cork()
  const uncork = () => to.socket.uncork()
  from.socket.prependListener("data", cork)
  from.socket.on("data", uncork)
  return () => {
    from.socket.off("data", cork)
    from.socket.off("data", uncork)
  }
}

/**
 * Splices the client's and Chromium's sockets until one side goes. One
 * ordered stream per direction: both puppeteer and playwright break if an
 * event overtakes the response of the command that caused it. The client's
 * frames pass the guard; Chromium's pass untouched.
 */
const splice = (client: End, upstream: End, session: SessionConnection) =>
  Effect.callback<Outcome>((resume) => {
    const guard: CdpGuard.GuardContext = { downloadsDir: session.downloadsDir }
    let settled = false
    const fromBrowser = (data: Buffer, isBinary: boolean) => forward(upstream, client, data, isBinary)
    const fromClient = (data: Buffer, isBinary: boolean) => {
      if (settled) return
      // Binary frames are inspected too: Chromium reads their bytes as JSON all the same.
      const verdict = CdpGuard.inspect(data, guard)
      switch (verdict._tag) {
        case "Forward":
          return forward(client, upstream, data, isBinary)
        case "Rewrite":
          return forward(client, upstream, verdict.frame, false)
        case "Answer":
          forward(upstream, client, verdict.reply, false)
          if (verdict.hangUp) settle({ _tag: "BrowserCloseRequested" })
      }
    }
    const browserGone = () => settle({ _tag: "BrowserGone" })
    const clientGone = () => settle({ _tag: "ClientGone" })
    const unbatch = [batchWrites(upstream, client), batchWrites(client, upstream)]
    const detach = () => {
      for (const undo of unbatch) undo()
      upstream.ws.off("message", fromBrowser)
      upstream.ws.off("close", browserGone)
      client.ws.off("message", fromClient)
      client.ws.off("close", clientGone)
      upstream.ws.resume()
      client.ws.resume()
    }
    function settle(outcome: Outcome) {
      if (settled) return
      settled = true
      detach()
      resume(Effect.succeed(outcome))
    }
    upstream.ws.on("message", fromBrowser)
    upstream.ws.once("close", browserGone)
    client.ws.on("message", fromClient)
    client.ws.once("close", clientGone)
    // A socket error is followed by its close event.
    upstream.ws.on("error", () => undefined)
    client.ws.on("error", () => undefined)
    if (upstream.ws.readyState !== WebSocket.OPEN) browserGone()
    else if (client.ws.readyState !== WebSocket.OPEN) clientGone()
    return Effect.sync(detach)
  })

const relay = (client: End, upstream: End, session: SessionConnection) =>
  Effect.gen(function* () {
    const outcome = yield* Effect.raceFirst(
      splice(client, upstream, session),
      Effect.map(session.ended, (reason): Outcome => ({ _tag: "SessionEnded", reason }))
    )
    // The browser goes down right after a session ends: report the session's reason.
    const ended = yield* session.endedReason
    const final: Outcome =
      outcome._tag === "BrowserGone" && Option.isSome(ended)
        ? { _tag: "SessionEnded", reason: ended.value }
        : outcome
    switch (final._tag) {
      case "SessionEnded":
        return yield* hangUp(client.ws, 1000, `session ended: ${final.reason}`)
      case "BrowserGone":
        return yield* hangUp(client.ws, 1011, "browser disconnected")
      case "BrowserCloseRequested":
        return yield* hangUp(client.ws, 1000, "Browser.close: the session stays open until DELETE")
      case "ClientGone":
        return yield* hangUp(client.ws, 1000, "")
    }
  })

/** What a CDP connect requires, from the route table. */
const CONNECT_ACCESS = RAW_ROUTES.find((route) => route.path === "/sessions/{id}")!.access

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
    const sessions = yield* Sessions

    const handler = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const params = yield* HttpRouter.params
        const id = params.id ?? ""
        const principal = yield* authenticator.bearer(connectToken(request))
        if (Option.isNone(principal)) return errorResponse(new Unauthorized())
        if (!isWebSocketUpgrade(request)) return errorResponse(new InvalidRequest())
        const owner = yield* authenticator
          .authorize(principal.value, CONNECT_ACCESS, request.headers[ACCOUNT_HEADER])
          .pipe(Effect.result)
        if (Result.isFailure(owner)) return errorResponse(owner.failure)
        const connection = yield* sessions
          .connect(owner.success, id)
          .pipe(Effect.provideService(CurrentOrigin, originOf(request)), Effect.result)
        if (Result.isFailure(connection)) return errorResponse(connection.failure)
        const upstream = yield* dial(connection.success.wsEndpoint).pipe(Effect.option)
        if (Option.isNone(upstream)) return errorResponse(new SessionNotOpen())
        const client = yield* accept(request).pipe(Effect.option)
        if (Option.isNone(client)) return HttpServerResponse.empty({ status: 400 })
        yield* Effect.logDebug("cdp.connected", { sessionId: id })
        yield* relay(client.value, upstream.value, connection.success)
        return HttpServerResponse.empty({ status: 101 })
      }).pipe(Effect.scoped)

    yield* router.add("GET", "/sessions/:id", handler)
  })
)
