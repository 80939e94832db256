import { Deferred, Effect, Option, Queue, Result } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Socket } from "effect/socket"
import WebSocket from "ws"
import { RAW_ROUTES } from "../auth/Access.ts"
import { CurrentOrigin } from "../auth/AuthMiddleware.ts"
import { ACCOUNT_HEADER, Authenticator, originOf } from "../auth/AuthMiddlewareLive.ts"
import { connectToken } from "../auth/Credentials.ts"
import * as CdpGuard from "./CdpGuard.ts"
import { InvalidRequest, SessionNotOpen, Unauthorized } from "../domain/Errors.ts"
import { errorResponse } from "../http/ErrorResponses.ts"
import { type SessionConnection, Sessions } from "../sessions/Sessions.ts"

const MAX_FRAME = 512 * 1024 * 1024

const isWebSocketUpgrade = (request: HttpServerRequest.HttpServerRequest) =>
  request.headers.upgrade?.toLowerCase() === "websocket"

/** Chromium's end of the relay. Never given the client's Origin or Host (it answers 403/500 to those). */
const dial = (endpoint: string) =>
  Effect.acquireRelease(
    Effect.callback<WebSocket, Error>((resume) => {
      const ws = new WebSocket(endpoint, { perMessageDeflate: false, maxPayload: MAX_FRAME })
      ws.once("open", () => resume(Effect.succeed(ws)))
      ws.once("error", (error) => resume(Effect.fail(error)))
    }),
    (ws) => Effect.sync(() => ws.terminate())
  )

const pipe = (socket: Socket.Socket, upstream: WebSocket, session: SessionConnection) =>
  Effect.gen(function* () {
    const guard: CdpGuard.GuardContext = { downloadsDir: session.downloadsDir }
    const writer = yield* socket.writer
    const reader = yield* socket.reader
    const toClient = yield* Queue.unbounded<string | Uint8Array>()
    const upstreamGone = yield* Deferred.make<void>()
    const hangUp = yield* Deferred.make<void>()

    // One ordered stream per direction: both puppeteer and playwright break
    // if an event overtakes the response of the command that caused it.
    upstream.on("message", (data: Buffer, isBinary: boolean) => {
      Queue.offerUnsafe(toClient, isBinary ? new Uint8Array(data) : data.toString("utf8"))
    })
    upstream.once("close", () => Deferred.doneUnsafe(upstreamGone, Effect.void))

    const downstream = Effect.forever(
      Effect.flatMap(Queue.takeAll(toClient), (frames) =>
        frames.length === 0
          ? Effect.void
          : writer.writeAll(frames as [string | Uint8Array, ...Array<string | Uint8Array>])
      )
    )

    const upstreamPump = Effect.forever(
      Effect.flatMap(reader.pull, (frames) =>
        Effect.sync(() => {
          for (const frame of frames) {
            // Binary frames are inspected too: Chromium reads their bytes as JSON all the same.
            const verdict = CdpGuard.inspect(
              typeof frame === "string" ? frame : Buffer.from(frame).toString("utf8"),
              guard
            )
            if (verdict._tag === "Answer") {
              Queue.offerUnsafe(toClient, verdict.reply)
              if (verdict.hangUp) Deferred.doneUnsafe(hangUp, Effect.void)
              continue
            }
            upstream.send(verdict._tag === "Rewrite" ? verdict.frame : frame)
          }
        })
      )
    )

    const flush = Effect.gen(function* () {
      const rest = yield* Queue.takeAll(toClient)
      if (rest.length > 0)
        yield* writer.writeAll(rest as [string | Uint8Array, ...Array<string | Uint8Array>])
    })

    const outcome = yield* Effect.raceAll([
      Effect.map(session.ended, (reason) => ({ _tag: "SessionEnded" as const, reason })),
      Effect.as(Deferred.await(upstreamGone), { _tag: "BrowserGone" as const }),
      Effect.as(Deferred.await(hangUp), { _tag: "BrowserCloseRequested" as const }),
      Effect.as(Effect.exit(upstreamPump), { _tag: "ClientGone" as const }),
      Effect.as(Effect.exit(downstream), { _tag: "ClientGone" as const })
    ])

    // The browser goes down right after a session ends: report the session's reason.
    const ended = yield* session.endedReason
    const final =
      outcome._tag === "BrowserGone" && Option.isSome(ended)
        ? { _tag: "SessionEnded" as const, reason: ended.value }
        : outcome

    switch (final._tag) {
      case "SessionEnded":
        yield* writer.write(new Socket.CloseEvent(1000, `session ended: ${final.reason}`)).pipe(Effect.ignore)
        break
      case "BrowserGone":
        yield* writer.write(new Socket.CloseEvent(1011, "browser disconnected")).pipe(Effect.ignore)
        break
      case "BrowserCloseRequested":
        yield* flush.pipe(Effect.ignore)
        yield* writer
          .write(new Socket.CloseEvent(1000, "Browser.close: the session stays open until DELETE"))
          .pipe(Effect.ignore)
        break
      case "ClientGone":
        break
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
        const socket = yield* request.upgrade
        yield* Effect.logDebug("cdp.connected", { sessionId: id })
        yield* pipe(socket, upstream.value, connection.success)
        return HttpServerResponse.empty()
      }).pipe(Effect.scoped)

    yield* router.add("GET", "/sessions/:id", handler)
  })
)
