import { Effect, Option, Stream } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import { HOP_HEADER, NodeHop } from "../live/NodeHop.ts"
import { RecordingNotFound, Unauthorized } from "../../kernel/Errors.ts"
import { RECORDING_CONTENT_TYPE } from "../../kernel/Recording.ts"
import { parseRange } from "./ByteRange.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import { Recordings } from "../../features/recordings/Recordings.ts"

/** The hop's purpose for a recording another node holds. */
const RECORDING = "recording"

/** The headers of a video answer that a relaying node passes on. */
const PASSED_ON = ["content-type", "content-length", "content-range", "accept-ranges", "cache-control"]

/** A blob of this node's store as an HTTP answer, whole or the one range asked for. */
const serveBlob = (
  blobs: BlobStore["Service"],
  key: string,
  bytes: number,
  rangeHeader: string | undefined
) => {
  const headers = { "accept-ranges": "bytes", "cache-control": "private, max-age=3600" }
  const range = parseRange(rangeHeader, bytes)
  if (range === "unsatisfiable") {
    return HttpServerResponse.empty({
      status: 416,
      headers: { ...headers, "content-range": `bytes */${bytes}` }
    })
  }
  if (range === undefined) {
    return HttpServerResponse.stream(blobs.read(key), {
      contentType: RECORDING_CONTENT_TYPE,
      contentLength: bytes,
      headers
    })
  }
  return HttpServerResponse.stream(blobs.read(key, range), {
    status: 206,
    contentType: RECORDING_CONTENT_TYPE,
    contentLength: range.end - range.start + 1,
    headers: { ...headers, "content-range": `bytes ${range.start}-${range.end}/${bytes}` }
  })
}

export const RecordingsHttp = HttpApiBuilder.group(
  Api,
  "recordings",
  Effect.fn(function* (handlers) {
    const recordings = yield* Recordings
    const blobs = yield* BlobStore
    const hop = yield* NodeHop

    /** Asks the node that holds a recording (its own blob store) through the hop. */
    const fromNode = (nodeUrl: string, sessionId: string, method: "GET" | "DELETE", range?: string) =>
      Effect.gen(function* () {
        const target = yield* hop.request(
          nodeUrl,
          method,
          `/internal/recordings/${sessionId}`,
          sessionId,
          RECORDING
        )
        return yield* Effect.tryPromise(() =>
          fetch(target.url, {
            method,
            headers: { ...target.headers, ...(range === undefined ? {} : { range }) }
          })
        ).pipe(Effect.mapError(() => new RecordingNotFound()))
      })

    return handlers
      .handleRaw("download", ({ params, request }) =>
        Effect.gen(function* () {
          const owner = yield* CurrentOwner
          const located = yield* recordings.locate(owner, params.id)
          const range = request.headers.range
          if (located._tag === "Here") return serveBlob(blobs, located.key, located.bytes, range)
          const answer = yield* fromNode(located.nodeUrl, params.id, "GET", range)
          if (answer.body === null || (answer.status !== 200 && answer.status !== 206)) {
            return yield* new RecordingNotFound()
          }
          const headers: Record<string, string> = {}
          for (const name of PASSED_ON) {
            const value = answer.headers.get(name)
            if (value !== null) headers[name] = value
          }
          const body = answer.body
          return HttpServerResponse.stream(
            Stream.fromReadableStream({ evaluate: () => body, onError: (error) => error }).pipe(Stream.orDie),
            { status: answer.status, headers }
          )
        })
      )
      .handle("delete", ({ params }) =>
        Effect.gen(function* () {
          const owner = yield* CurrentOwner
          // The node holding the video removes its copy; `remove` answers the 404s and drops the row.
          const located = yield* recordings.locate(owner, params.id).pipe(Effect.option)
          if (Option.isSome(located) && located.value._tag === "Elsewhere") {
            yield* fromNode(located.value.nodeUrl, params.id, "DELETE").pipe(Effect.ignore)
          }
          yield* recordings.remove(owner, params.id)
        })
      )
  })
)

/**
 * The hop's end on the node holding a recording in its own blob store:
 * another node, having checked the caller, asks for the video (or its
 * removal) with its signed token.
 */
export const layerInternal = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const recordings = yield* Recordings
    const blobs = yield* BlobStore
    const hop = yield* NodeHop
    const held = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const id = (yield* HttpRouter.params).id ?? ""
        if (!(yield* hop.verify(request.headers[HOP_HEADER], id, RECORDING, request))) {
          return Option.none<{ readonly key: string; readonly bytes: number }>()
        }
        return yield* recordings.locateHere(id)
      })
    yield* router.add("GET", "/internal/recordings/:id", (request) =>
      Effect.map(held(request), (found) =>
        Option.match(found, {
          onNone: () => errorResponse(new Unauthorized()),
          onSome: (blob) => serveBlob(blobs, blob.key, blob.bytes, request.headers.range)
        })
      )
    )
    yield* router.add("DELETE", "/internal/recordings/:id", (request) =>
      Effect.flatMap(held(request), (found) =>
        Option.match(found, {
          onNone: () => Effect.succeed(errorResponse(new Unauthorized())),
          onSome: (blob) => Effect.as(blobs.remove(blob.key), HttpServerResponse.empty({ status: 204 }))
        })
      )
    )
  })
)
