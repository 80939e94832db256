/**
 * The door's relay of a plain (not WebSocket) request to the node that runs
 * the session: the request's body and the answer are streamed through, with
 * only the headers that belong to both ends. `SessionDoor` decides where.
 */
import { Effect, Option, Stream } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { unreachable } from "./Ends.ts"

/** The request headers a relayed plain request keeps (never the client's credentials). */
const FORWARDED_HEADERS = [
  "content-type",
  "content-length",
  "accept",
  "last-event-id",
  "range",
  "if-none-match",
  "idempotency-key"
]

/** Headers of one hop only, never relayed (the owner node's own `Host`, the connection's). */
const NOT_RELAYED = new Set([
  "host",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "proxy-authorization",
  "content-length"
])

/** The response headers passed back from the owner node. */
const DROPPED_RESPONSE_HEADERS = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-encoding"
])

/** Relays a plain request to the owner node's twin route, streaming both bodies. */
export const forward = (
  request: HttpServerRequest.HttpServerRequest,
  url: string,
  hopHeaders: Record<string, string>,
  read?: Uint8Array,
  allHeaders = false
) =>
  Effect.gen(function* () {
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(request.headers)) {
      const passed = allHeaders ? !NOT_RELAYED.has(name) : FORWARDED_HEADERS.includes(name)
      if (passed && value !== undefined) headers[name] = value
    }
    Object.assign(headers, hopHeaders)
    const hasBody = request.method !== "GET" && request.method !== "HEAD"
    if (read !== undefined) delete headers["content-length"]
    // A JSON body was read already (InputGuard looks into it) and is cached as text:
    // its stream would be empty. Every other body is streamed through.
    const isJson = String(request.headers["content-type"] ?? "").includes("json")
    const body =
      read !== undefined
        ? read
        : !hasBody
          ? undefined
          : isJson
            ? yield* request.text.pipe(Effect.orElseSucceed(() => ""))
            : Stream.toReadableStream(request.stream.pipe(Stream.orDie))
    if (isJson && read === undefined) delete headers["content-length"]
    const answer = yield* Effect.tryPromise((signal) =>
      fetch(url, {
        method: request.method,
        headers,
        signal,
        ...(body === undefined ? {} : { body, duplex: "half" })
      } as RequestInit)
    ).pipe(
      Effect.tapError((error) =>
        Effect.logWarning("session.hop_failed", {
          sessionNode: new URL(url).origin,
          error: String(error.cause)
        })
      ),
      Effect.option
    )
    if (Option.isNone(answer)) return unreachable(new Error("the session's node cannot be reached"))
    const passed: Record<string, string> = {}
    answer.value.headers.forEach((value, name) => {
      if (!DROPPED_RESPONSE_HEADERS.has(name) && name !== "content-length") passed[name] = value
    })
    const upstream = answer.value.body
    if (upstream === null) return HttpServerResponse.empty({ status: answer.value.status, headers: passed })
    const length = answer.value.headers.get("content-length")
    return HttpServerResponse.stream(
      Stream.fromReadableStream({ evaluate: () => upstream, onError: (error) => error }).pipe(Stream.orDie),
      {
        status: answer.value.status,
        headers: passed,
        ...(length === null ? {} : { contentLength: Number(length) })
      }
    )
  })
