import { Clock, Effect, Schema } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { Audit } from "../../features/audit/Audit.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import * as BrowserDownloads from "../../runtimes/browser/BrowserDownloads.ts"
import { NodeConfig, PublicUrls } from "../../platform/config/Config.ts"
import { InvalidField, InvalidRequest, SessionNotOpen, SessionTypeMismatch } from "../../kernel/Errors.ts"
import type { FileNotFound, FileTooLarge, TooManyUploads } from "../../kernel/SandboxErrors.ts"
import { type Owner, permits } from "../../kernel/Owner.ts"
import { BrowserUploadResult, CommandInfo, DownloadList, UploadResult } from "../../kernel/Sandbox.ts"
import type { ConnectionKind } from "../../features/sessions/SessionConnections.ts"
import { INTERNAL_PREFIX, type Here, type Kept, type Params, SessionDoor } from "../live/SessionDoor.ts"
import { Sessions } from "../../features/sessions/Sessions.ts"
import { SessionKinds } from "../../runtime/SessionKinds.ts"
import * as Exec from "../../features/sessions/Exec.ts"
import { gatewayOrigin } from "../live/GatewayHost.ts"
import { LINK_PARAM } from "../live/Gateway.ts"
import { GatewayTokens } from "../live/GatewayTokens.ts"
import * as Files from "../../features/sessions/Files.ts"
import * as FileWatches from "../../features/sessions/FileWatches.ts"
import type { WatchNotFound } from "../../kernel/SandboxErrors.ts"
import { SandboxCalls } from "../../features/sessions/SandboxCalls.ts"

/** A JSON answer encoded with the route's own schema (dates as ISO strings). */
const json = <A, I>(schema: Schema.Codec<A, I>, value: A, status = 200) =>
  HttpServerResponse.jsonUnsafe(Schema.encodeSync(schema)(value), { status })

const queryOf = (request: HttpServerRequest.HttpServerRequest) =>
  new URL(request.url, "http://sandbox").searchParams

const sessionId = (params: Params) => params.id ?? ""
const commandId = (params: Params) => params.cid ?? ""
const watchId = (params: Params) => params.wid ?? ""

/** A call of a session's as the caller, with the API's error for what it refuses. */
const caller = Effect.service(CurrentOwner)

const stream: Here<"sandbox", Exec.FindError | InvalidField> = (request, connection, _owner, params) =>
  Effect.gen(function* () {
    const found = yield* Exec.find(connection.runtime.exec.commands, commandId(params))
    const query = queryOf(request)
    const last = request.headers["last-event-id"] ?? query.get("last_event_id") ?? "0"
    if (!/^\d{1,15}$/.test(last)) return yield* new InvalidField({ field: "last_event_id" })
    const encoding = query.get("encoding") ?? "utf8"
    if (encoding !== "utf8" && encoding !== "base64") return yield* new InvalidField({ field: "encoding" })
    return HttpServerResponse.stream(Exec.events(found, Number(last), encoding), {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
    })
  })

/** A watch's changes, resumed after the last one the client saw. */
const watchEvents: Here<"sandbox", WatchNotFound | InvalidField> = (request, connection, _owner, params) =>
  Effect.gen(function* () {
    const found = yield* FileWatches.find(connection.runtime.exec.watches, watchId(params))
    const after = yield* FileWatches.resumePoint(
      request.headers["last-event-id"] ?? queryOf(request).get("last_event_id") ?? undefined
    )
    return HttpServerResponse.stream(FileWatches.events(found, after), {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
    })
  })

const upload: Here<"sandbox", Files.UploadError> = (request, connection) =>
  Effect.map(Files.upload(connection.runtime, request), (result) => json(UploadResult, result))

const pathOf = (request: HttpServerRequest.HttpServerRequest) => {
  const path = queryOf(request).get("path")
  return path === null ? Effect.fail(new InvalidField({ field: "path" })) : Effect.succeed(path)
}

/** A file for a browser session's pages, into its uploads dir (shown to its browser at the first). */
const browserUpload: Here<"downloads", InvalidField | InvalidRequest | FileTooLarge | TooManyUploads> = (
  request,
  connection
) =>
  Effect.gen(function* () {
    const dir = yield* Effect.orDie(connection.runtime.uploadsDir)
    return json(BrowserUploadResult, yield* BrowserDownloads.receiveUpload(connection.runtime, dir, request))
  })

/** A sandbox's file. */
const download: Here<"sandbox", Files.DownloadError> = (request, connection) =>
  Effect.flatMap(pathOf(request), (path) => Files.download(connection.runtime, path))

/** The twin route of a browser session's kept download (`GET .../download` of a browser session). */
const KEPT_DOWNLOAD = "/v1/sessions/:id/downloads/file"

/** What a browser session downloaded, kept on the node that ran it: one file, or the list. */
const keptDownloads = (dataDir: string) => ({
  file: ((request, id) =>
    Effect.flatMap(pathOf(request), (path) =>
      BrowserDownloads.serve(BrowserDownloads.dirOf(dataDir, id), path)
    )) satisfies Kept<FileNotFound | InvalidField>,
  list: ((_request, id) =>
    Effect.map(BrowserDownloads.list(BrowserDownloads.dirOf(dataDir, id)), (data) =>
      json(DownloadList, { object: "list", data })
    )) satisfies Kept<never>
})

/**
 * The routes of byte streams: a file up or down as it comes (each through
 * the door to the session's node, as `owner`, for `request`: its body and
 * query are the route's input), and what a browser session downloaded.
 */
export const makeRoutes = Effect.gen(function* () {
  const door = yield* SessionDoor
  const config = yield* NodeConfig
  const sessions = yield* Sessions
  const kinds = yield* SessionKinds
  const kept = keptDownloads(config.dataDir)

  /** Through the door to the session's node, as the caller. */
  const through =
    <K extends ConnectionKind, E>(kind: K, route: Here<K, E>) =>
    (owner: Owner, request: HttpServerRequest.HttpServerRequest, params: Params) =>
      door.serve(request, { owner, id: sessionId(params), kind, params }, route)

  const fileOrDownload = (owner: Owner, request: HttpServerRequest.HttpServerRequest, params: Params) =>
    Effect.gen(function* () {
      const id = sessionId(params)
      const session = yield* sessions.get(owner, id)
      // A kind with files serves a path of its own; the others, what the browser downloaded.
      if (kinds.ofRow(session).capabilities.has("exec"))
        return yield* through("sandbox", download)(owner, request, params)
      const query = request.url.indexOf("?")
      return yield* door.serveKept(
        request,
        {
          owner,
          id,
          kind: "downloads",
          path: `${KEPT_DOWNLOAD.replace(":id", id)}${query < 0 ? "" : request.url.slice(query)}`
        },
        kept.file
      )
    })

  return {
    through,
    upload: through("sandbox", upload),
    browserUpload: through("downloads", browserUpload),
    download: fileOrDownload,
    downloads: (owner: Owner, request: HttpServerRequest.HttpServerRequest, params: Params) =>
      door.serveKept(request, { owner, id: sessionId(params), kind: "downloads" }, kept.list)
  }
})

export const SandboxHttp = HttpApiBuilder.group(
  Api,
  "sandbox",
  Effect.fn(function* (handlers) {
    const config = yield* PublicUrls
    const calls = yield* SandboxCalls
    const audit = yield* Audit
    const sessions = yield* Sessions
    const kinds = yield* SessionKinds
    const links = yield* GatewayTokens
    const routes = yield* makeRoutes

    /** A route of `routes` as the caller. */
    const asCaller =
      <A, E, R>(
        route: (
          owner: Owner,
          request: HttpServerRequest.HttpServerRequest,
          params: Params
        ) => Effect.Effect<A, E, R>
      ) =>
      ({
        params,
        request
      }: {
        readonly params: Params
        readonly request: HttpServerRequest.HttpServerRequest
      }) =>
        Effect.flatMap(Effect.service(CurrentOwner), (owner) => route(owner, request, params))
    const through = <K extends ConnectionKind, E>(kind: K, route: Here<K, E>) =>
      asCaller(routes.through(kind, route))

    return handlers
      .handle("exec", ({ params, payload }) =>
        Effect.flatMap(caller, (owner) =>
          Effect.map(calls.exec(owner, params.id, payload), (outcome) =>
            outcome.background ? json(CommandInfo, outcome.info, 202) : outcome.result
          )
        )
      )
      .handle("commands", ({ params }) => Effect.flatMap(caller, (owner) => calls.commands(owner, params.id)))
      .handle("command", ({ params }) =>
        Effect.flatMap(caller, (owner) => calls.command(owner, params.id, params.cid))
      )
      .handleRaw("stream", through("sandbox", stream))
      .handle("stdin", ({ params, payload }) =>
        Effect.flatMap(caller, (owner) => calls.stdin(owner, params.id, params.cid, payload ?? {}))
      )
      .handle("kill", ({ params, payload }) =>
        Effect.flatMap(caller, (owner) => calls.kill(owner, params.id, params.cid, payload ?? {}))
      )
      .handleRaw("upload", asCaller(routes.upload))
      .handleRaw("browserUpload", asCaller(routes.browserUpload))
      .handleRaw("download", asCaller(routes.download))
      .handleRaw("downloads", asCaller(routes.downloads))
      .handle("listFiles", ({ params, query }) =>
        Effect.flatMap(caller, (owner) =>
          calls.listFiles(owner, params.id, query.path ?? "/root", {
            limit: query.limit,
            cursor: query.cursor
          })
        )
      )
      .handle("statFile", ({ params, query }) =>
        Effect.flatMap(caller, (owner) => calls.statFile(owner, params.id, query.path ?? ""))
      )
      .handle("makeDirectory", ({ params, payload }) =>
        Effect.flatMap(caller, (owner) => calls.makeDirectory(owner, params.id, payload))
      )
      .handle("moveFile", ({ params, payload }) =>
        Effect.flatMap(caller, (owner) => calls.moveFile(owner, params.id, payload))
      )
      .handle("removeFile", ({ params, query }) =>
        Effect.flatMap(caller, (owner) =>
          calls.removeFile(owner, params.id, query.path ?? "", query.recursive === "true")
        )
      )
      .handle("startWatch", ({ params, payload }) =>
        Effect.flatMap(caller, (owner) => calls.startWatch(owner, params.id, payload))
      )
      .handle("watches", ({ params }) => Effect.flatMap(caller, (owner) => calls.watches(owner, params.id)))
      .handle("watch", ({ params }) =>
        Effect.flatMap(caller, (owner) => calls.watch(owner, params.id, params.wid))
      )
      .handleRaw("watchEvents", through("sandbox", watchEvents))
      .handle("stopWatch", ({ params }) =>
        Effect.flatMap(caller, (owner) => calls.stopWatch(owner, params.id, params.wid))
      )
      .handle("selfTest", ({ params }) => Effect.flatMap(caller, (owner) => calls.selfTest(owner, params.id)))
      .handle("gatewayToken", ({ params, payload }) =>
        Effect.gen(function* () {
          const owner = yield* Effect.service(CurrentOwner)
          const session = yield* sessions.get(owner, params.id)
          const kind = kinds.ofRow(session)
          if (!kind.capabilities.has("gateway"))
            return yield* new SessionTypeMismatch({ detail: kind.refusal("gateway") })
          if (session.status !== "creating" && session.status !== "ready") return yield* new SessionNotOpen()
          if (payload.port === undefined) return yield* new InvalidField({ field: "port" })
          const now = yield* Clock.currentTimeMillis
          const expiresAt = new Date(
            Math.min(now + (payload.ttl_seconds ?? 3600) * 1000, session.expires_at.getTime())
          )
          const token = links.sign({
            sessionId: params.id,
            accountId: owner.accountId,
            expiresAt,
            write: permits(owner, "sessions.write")
          })
          yield* audit.record(owner, {
            action: "session.gateway_link_issued",
            targetType: "session",
            targetId: params.id,
            details: { port: payload.port, expires_at: expiresAt.toISOString() }
          })
          return {
            // Its own origin when there is a gateway domain, else a path on the service's origin.
            url:
              config.gatewayDomain === undefined
                ? `${config.publicUrl}/s/${params.id}/${payload.port}/?${LINK_PARAM}=${token}`
                : `${gatewayOrigin(config.publicUrl, config.gatewayDomain, params.id, payload.port)}/?${LINK_PARAM}=${token}`,
            token,
            expires_at: expiresAt
          }
        })
      )
      .handle("run", ({ payload }) => Effect.flatMap(caller, (owner) => calls.run(owner, payload)))
  })
)

/** The hop's twins of the sandbox routes, on the node that runs the session. */
export const layerInternal = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const door = yield* SessionDoor
    const config = yield* NodeConfig
    const twin = <P extends string>(path: P) => `${INTERNAL_PREFIX}${path}` as const
    yield* router.add("GET", twin("/v1/sessions/:id/commands/:cid/stream"), door.internal("sandbox", stream))
    yield* router.add(
      "GET",
      twin("/v1/sessions/:id/files/watches/:wid/events"),
      door.internal("sandbox", watchEvents)
    )
    yield* router.add("POST", twin("/v1/sessions/:id/upload"), door.internal("sandbox", upload))
    yield* router.add("POST", twin("/v1/sessions/:id/uploads"), door.internal("downloads", browserUpload))
    const kept = keptDownloads(config.dataDir)
    yield* router.add("GET", twin("/v1/sessions/:id/download"), door.internal("sandbox", download))
    yield* router.add("GET", twin(KEPT_DOWNLOAD), door.internalKept("downloads", kept.file))
    yield* router.add("GET", twin("/v1/sessions/:id/downloads"), door.internalKept("downloads", kept.list))
  })
)
