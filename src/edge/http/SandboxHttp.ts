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
import {
  BrowserUploadResult,
  CommandInfo,
  CommandList,
  DownloadList,
  ExecRequest,
  ExecResult,
  KillRequest,
  SelfTestReport,
  StdinRequest,
  UploadResult
} from "../../kernel/Sandbox.ts"
import { decodeInput } from "../../kernel/Validation.ts"
import type { ConnectionKind } from "../../features/sessions/SessionConnections.ts"
import { INTERNAL_PREFIX, type Here, type Kept, type Params, SessionDoor } from "../live/SessionDoor.ts"
import { Sessions } from "../../features/sessions/Sessions.ts"
import { SessionKinds } from "../../runtime/SessionKinds.ts"
import * as Exec from "../../features/sessions/Exec.ts"
import { gatewayOrigin } from "../live/GatewayHost.ts"
import { LINK_PARAM } from "../live/Gateway.ts"
import { GatewayTokens } from "../live/GatewayTokens.ts"
import * as Files from "../../features/sessions/Files.ts"
import { RunOnce } from "./RunOnce.ts"
import * as SelfTest from "../../runtime/SelfTestChecks.ts"

/** A JSON answer encoded with the route's own schema (dates as ISO strings). */
const json = <A, I>(schema: Schema.Codec<A, I>, value: A, status = 200) =>
  HttpServerResponse.jsonUnsafe(Schema.encodeSync(schema)(value), { status })

/** The request's JSON body; an empty body is `null` (the routes whose fields are all optional). */
const body = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.flatMap(
    request.text.pipe(Effect.mapError(() => new InvalidRequest())),
    (text): Effect.Effect<unknown, InvalidRequest> => {
      if (text.trim() === "") return Effect.succeed(null)
      try {
        return Effect.succeed(JSON.parse(text))
      } catch {
        return Effect.fail(new InvalidRequest())
      }
    }
  )

// These routes read their own body (on the node that runs the sandbox, through the hop too): decoded here.
const decodeExec = decodeInput(ExecRequest)
const decodeStdin = decodeInput(StdinRequest)
const decodeKill = decodeInput(KillRequest)

const queryOf = (request: HttpServerRequest.HttpServerRequest) =>
  new URL(request.url, "http://sandbox").searchParams

const sessionId = (params: Params) => params.id ?? ""
const commandId = (params: Params) => params.cid ?? ""

const makeExec =
  (audit: Audit["Service"]): Here<"sandbox", Exec.ExecError> =>
  (request, connection, owner: Owner, params) =>
    Effect.gen(function* () {
      const input = yield* decodeExec(yield* body(request))
      const outcome = yield* Exec.execute(audit, sessionId(params), connection.runtime, owner, input)
      return outcome.background ? json(CommandInfo, outcome.info, 202) : json(ExecResult, outcome.result)
    })

const commands: Here<"sandbox", never> = (_request, connection, _owner, params) =>
  Effect.succeed(
    json(CommandList, {
      object: "list",
      data: connection.runtime.exec.commands.list().map((each) => Exec.infoOf(sessionId(params), each))
    })
  )

const command: Here<"sandbox", Exec.FindError> = (_request, connection, _owner, params) =>
  Effect.map(Exec.find(connection.runtime.exec.commands, commandId(params)), (found) =>
    json(CommandInfo, Exec.infoOf(sessionId(params), found))
  )

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

const stdin: Here<"sandbox", Exec.StdinError> = (request, connection, _owner, params) =>
  Effect.gen(function* () {
    const raw = yield* body(request)
    // A command that is not there is 404 whatever the body holds.
    const commands = connection.runtime.exec.commands
    const command = yield* Exec.find(commands, commandId(params))
    return HttpServerResponse.jsonUnsafe(
      yield* Exec.writeStdin(commands, command, yield* decodeStdin(raw ?? {}))
    )
  })

const kill: Here<"sandbox", Exec.KillError> = (request, connection, _owner, params) =>
  Effect.gen(function* () {
    const raw = yield* body(request)
    // A command that is not there is 404 whatever the body holds.
    const command = yield* Exec.find(connection.runtime.exec.commands, commandId(params))
    const killed = yield* Exec.kill(command, yield* decodeKill(raw ?? {}))
    return json(CommandInfo, Exec.infoOf(sessionId(params), killed))
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
 * The sandbox routes whose answer the MCP tools give too (`sandbox_exec`,
 * `files_read`, `files_write`): each through the door to the session's node,
 * as `owner`, for `request` (its body and query are the route's input).
 */
export const makeRoutes = Effect.gen(function* () {
  const door = yield* SessionDoor
  const config = yield* NodeConfig
  const sessions = yield* Sessions
  const kinds = yield* SessionKinds
  const exec = makeExec(yield* Audit)
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
    exec: through("sandbox", exec),
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
    const runOnce = yield* RunOnce
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

    const selfTest: Here<"check", never> = (_request, connection, _owner, params) =>
      Effect.map(SelfTest.run(sessionId(params), connection.runtime), (report) =>
        json(SelfTestReport, report)
      )

    return handlers
      .handleRaw("exec", asCaller(routes.exec))
      .handleRaw("commands", through("sandbox", commands))
      .handleRaw("command", through("sandbox", command))
      .handleRaw("stream", through("sandbox", stream))
      .handleRaw("stdin", through("sandbox", stdin))
      .handleRaw("kill", through("sandbox", kill))
      .handleRaw("upload", asCaller(routes.upload))
      .handleRaw("browserUpload", asCaller(routes.browserUpload))
      .handleRaw("download", asCaller(routes.download))
      .handleRaw("downloads", asCaller(routes.downloads))
      .handleRaw("selfTest", through("check", selfTest))
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
      .handleRaw("run", ({ request }) =>
        Effect.flatMap(Effect.service(CurrentOwner), (owner) => runOnce.run(owner, request))
      )
  })
)

/** The hop's twins of the sandbox routes, on the node that runs the session. */
export const layerInternal = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const door = yield* SessionDoor
    const config = yield* NodeConfig
    const exec = makeExec(yield* Audit)
    const twin = <P extends string>(path: P) => `${INTERNAL_PREFIX}${path}` as const
    yield* router.add("POST", twin("/v1/sessions/:id/exec"), door.internal("sandbox", exec))
    yield* router.add("GET", twin("/v1/sessions/:id/commands"), door.internal("sandbox", commands))
    yield* router.add("GET", twin("/v1/sessions/:id/commands/:cid"), door.internal("sandbox", command))
    yield* router.add("GET", twin("/v1/sessions/:id/commands/:cid/stream"), door.internal("sandbox", stream))
    yield* router.add("POST", twin("/v1/sessions/:id/commands/:cid/stdin"), door.internal("sandbox", stdin))
    yield* router.add("POST", twin("/v1/sessions/:id/commands/:cid/kill"), door.internal("sandbox", kill))
    yield* router.add("POST", twin("/v1/sessions/:id/upload"), door.internal("sandbox", upload))
    yield* router.add("POST", twin("/v1/sessions/:id/uploads"), door.internal("downloads", browserUpload))
    const kept = keptDownloads(config.dataDir)
    yield* router.add("GET", twin("/v1/sessions/:id/download"), door.internal("sandbox", download))
    yield* router.add("GET", twin(KEPT_DOWNLOAD), door.internalKept("downloads", kept.file))
    yield* router.add("GET", twin("/v1/sessions/:id/downloads"), door.internalKept("downloads", kept.list))
    yield* router.add(
      "POST",
      `${INTERNAL_PREFIX}/v1/sessions/:id/self-test`,
      door.internal("check", (_request, connection, _owner, params) =>
        Effect.map(SelfTest.run(sessionId(params), connection.runtime), (report) =>
          json(SelfTestReport, report)
        )
      )
    )
  })
)
