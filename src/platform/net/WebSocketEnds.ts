import { Data, Effect } from "effect"
import type { Socket as NetSocket } from "node:net"
import WebSocket from "ws"

// A WebSocket's end as the relays hold it: the `ws` socket and its TCP
// connection, dialed to an upstream (Chromium, or the owner node through the
// hop) or accepted from a client (edge/live/Ends.ts).

/** Frames are large: a full-page screenshot answers in 16 MB or more of base64. */
export const MAX_FRAME = 512 * 1024 * 1024
/**
 * The most a client may send in one message: a client's commands are small
 * but for a page's HTML, a script or a fulfilled response's body (base64),
 * and each message is held whole in the node's memory while it is read. A
 * larger one closes the connection (1009) as its header arrives.
 */
export const CLIENT_MAX_MESSAGE = 16 * 1024 * 1024
/** How long a client gets to answer our close frame before its socket is cut. */
const CLOSE_GRACE_MS = 2_000

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
