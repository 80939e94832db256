import { Effect, Option, Schema, Stream } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Nodes } from "../../platform/cluster/Nodes.ts"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import { HOP_HEADER, NodeHop } from "../live/NodeHop.ts"
import { BlobsConfig, NodeConfig } from "../../platform/config/Config.ts"
import { Unauthorized } from "../../kernel/Errors.ts"
import { JobConflict } from "../../kernel/Job.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import { JobKinds } from "../../features/jobs/JobKinds.ts"
import { Jobs } from "../../features/jobs/Jobs.ts"

/** The hop's purpose: a job result in another node's own blob store (a directory store). */
const JOB_RESULT = "job_result"

const gone = () => new JobConflict({ detail: "The job's result is no longer kept." })

export const JobsHttp = HttpApiBuilder.group(
  Api,
  "jobs",
  Effect.fn(function* (handlers) {
    const jobs = yield* Jobs
    const kinds = yield* JobKinds
    const blobs = yield* BlobStore
    const hop = yield* NodeHop
    const nodes = yield* Nodes
    const config = { ...(yield* NodeConfig), ...(yield* BlobsConfig) }
    const owner = Effect.service(CurrentOwner)
    // Computed once: the kinds are fixed for the process.
    const kindList = {
      kinds: kinds.all
        .filter((kind) => kind.internal !== true)
        .map((kind) => ({
          kind: kind.kind,
          description: kind.description,
          input_schema: Schema.toJsonSchemaDocument(kind.input).schema,
          requires: kind.requires
        }))
    }

    /** The result from the node whose directory store holds it, through the hop. */
    const fromNode = (nodeId: string, jobId: string) =>
      Effect.gen(function* () {
        const url = yield* nodes.urlOf(nodeId)
        if (Option.isNone(url)) return yield* gone()
        const target = yield* hop.request(
          url.value,
          "GET",
          `/internal/jobs/${jobId}/result`,
          jobId,
          JOB_RESULT
        )
        const answer = yield* Effect.tryPromise(() => fetch(target.url, { headers: target.headers })).pipe(
          Effect.mapError(gone)
        )
        if (answer.status !== 200 || answer.body === null) return yield* gone()
        const body = answer.body
        return Stream.fromReadableStream({ evaluate: () => body, onError: (error) => error }).pipe(
          Stream.orDie
        )
      })

    return handlers
      .handle("create", ({ payload }) => Effect.flatMap(owner, (o) => jobs.create(o, payload)))
      .handle("list", ({ query }) =>
        Effect.flatMap(owner, (o) =>
          Effect.map(jobs.list(o, query), (page) => ({
            object: "list" as const,
            data: page.data,
            has_more: page.nextCursor !== null,
            next_cursor: page.nextCursor
          }))
        )
      )
      .handle("kinds", () => Effect.succeed(kindList))
      .handle("get", ({ params }) => Effect.flatMap(owner, (o) => jobs.get(o, params.id)))
      .handleRaw("result", ({ params }) =>
        Effect.gen(function* () {
          const blob = yield* jobs.result(yield* owner, params.id)
          const here = config.blobStore._tag === "S3" || blob.nodeId === config.nodeId
          const body = here
            ? (yield* blobs.stat(blob.key))._tag === "Some"
              ? blobs.read(blob.key)
              : yield* gone()
            : yield* fromNode(blob.nodeId, params.id)
          return HttpServerResponse.stream(body, {
            contentType: blob.contentType,
            contentLength: blob.bytes,
            headers: { "cache-control": "private, max-age=3600" }
          })
        })
      )
      .handle("cancel", ({ params }) => Effect.flatMap(owner, (o) => jobs.cancel(o, params.id)))
      .handle("retry", ({ params }) => Effect.flatMap(owner, (o) => jobs.retry(o, params.id)))
  })
)

/** The hop's end on the node whose own (directory) blob store holds a job's result. */
export const layerInternal = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const blobs = yield* BlobStore
    const hop = yield* NodeHop
    const jobs = yield* Jobs
    yield* router.add("GET", "/internal/jobs/:id/result", (request) =>
      Effect.gen(function* () {
        const id = (yield* HttpRouter.params).id ?? ""
        if (!(yield* hop.verify(request.headers[HOP_HEADER], id, JOB_RESULT, request)))
          return errorResponse(new Unauthorized())
        const key = yield* jobs.resultKey(id)
        const found = key == null ? undefined : yield* blobs.stat(key)
        if (key == null || found === undefined || found._tag === "None") return errorResponse(gone())
        return HttpServerResponse.stream(blobs.read(key), {
          contentType: "application/octet-stream",
          contentLength: found.value.bytes
        })
      })
    )
  })
)
