import { Context, Effect, Layer, Option, Schema } from "effect"
import { McpProtocol, McpSchema, McpServer } from "effect/ai"
import { HttpEffect, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { CurrentOrigin, CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { Authenticator, originOf } from "../guard/Authenticator.ts"
import { PublicUrls } from "../../platform/config/Config.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import { authorizeRaw } from "../guard/RawAuth.ts"
import {
  RateLimitReport,
  type RateLimitReportCell,
  rateLimitHeaders
} from "../../features/limits/RateLimitReport.ts"
import type { RateLimits } from "../../features/limits/RateLimits.ts"
import type { Audit } from "../../features/audit/Audit.ts"
import type { Jobs } from "../../features/jobs/Jobs.ts"
import type { Sessions } from "../../features/sessions/Sessions.ts"
import type { Workspaces } from "../../features/workspaces/Workspaces.ts"
import type { WorkspaceSnapshots } from "../../features/workspaces/WorkspaceSnapshots.ts"
import type { SessionKinds } from "../../runtime/SessionKinds.ts"
import { Policy } from "../guard/Policy.ts"
import { RAW } from "../guard/RawRoutes.ts"
import type { SessionDoor } from "../live/SessionDoor.ts"
import * as McpCall from "./McpCall.ts"
import * as McpFastPath from "./McpFastPath.ts"
import { TOOLS } from "./McpTools.ts"

export const MCP_PATH = "/v1/mcp"

/** The MCP revisions served, newest first; the client's offer picks one. */
const PROTOCOLS = [McpProtocol.v2025_11_25, McpProtocol.v2025_06_18, McpProtocol.v2025_03_26] as const

/** Registers every tool with the server; each call runs as the request's owner. */
const Tools = Layer.effectDiscard(
  Effect.gen(function* () {
    const server = yield* McpServer.McpServer
    const call = yield* McpCall.make
    for (const tool of TOOLS) {
      yield* server.addTool({
        tool: new McpSchema.Tool({
          name: tool.name,
          title: tool.title,
          description: tool.description,
          inputSchema: Schema.toJsonSchemaDocument(tool.input).schema as any,
          annotations: {
            title: tool.title,
            readOnlyHint: tool.readOnly,
            destructiveHint: tool.destructive,
            idempotentHint: tool.readOnly,
            openWorldHint: tool.name.startsWith("browser_")
          }
        }),
        annotations: Context.empty(),
        handle: (payload: unknown) =>
          Effect.map(call(tool, payload), (result) => new McpSchema.CallToolResult(result as any)) as any
      })
    }
  })
)

/**
 * `tools/list` shows only the tools the caller may call: its role, and a
 * scoped key's scopes, hold the tool's route's permission. A call of another
 * tool still reaches it, and is refused there as its route refuses (403
 * `forbidden`, audited where the route is).
 */
const Listing = Effect.sync(() => {
  const accessOf = McpCall.toolAccess(TOOLS)
  return McpServer.visibility(
    (options) =>
      options.method !== "tools/list"
        ? Effect.succeed(true)
        : Effect.flatMap(
            Effect.all([Effect.service(CurrentOwner), Effect.service(Authenticator)]),
            ([owner, authenticator]) => {
              const required = accessOf.get(options.target)
              return required === undefined
                ? Effect.succeed(true)
                : authenticator.check(owner, required).pipe(
                    Effect.as(true),
                    Effect.orElseSucceed(() => false)
                  )
            }
          ),
    { global: true }
  )
})

/**
 * Streamable HTTP asks a client to accept both JSON and an event stream, and
 * answers 406 otherwise: a client that states no preference (curl; any type)
 * is taken to accept both, and gets JSON.
 */
const acceptingJson = (request: HttpServerRequest.HttpServerRequest) => {
  const accept = request.headers.accept
  return accept === undefined || accept.trim() === "" || accept.includes("*/*")
    ? request.modify({ headers: { ...request.headers, accept: "application/json, text/event-stream" } })
    : request
}

/**
 * The door of `/v1/mcp`: the caller's credentials and account as any `/v1`
 * route takes them (401, 403, 404 `account_not_found` in the spec's shape),
 * then the endpoint's own rate limit, per principal, with the `X-RateLimit-*`
 * headers. The owner it finds is every tool call's.
 */
const Door = HttpRouter.middleware<{ provides: CurrentOwner }>()(
  Effect.gen(function* () {
    const policy = yield* Policy
    const authenticator = yield* Authenticator
    const quick = McpFastPath.make(TOOLS, yield* McpCall.make)
    const { publicUrl } = yield* PublicUrls
    const publicOrigin = new URL(publicUrl).origin
    return (httpEffect) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const owner = yield* authorizeRaw(request, RAW.mcp.access, publicOrigin).pipe(
          Effect.provideService(Authenticator, authenticator),
          Effect.result
        )
        if (owner._tag === "Failure") return errorResponse(owner.failure)
        const cell: RateLimitReportCell = { current: undefined }
        const limited = yield* policy
          .spend(owner.success, RAW.mcp.limit, undefined)
          .pipe(Effect.provideService(RateLimitReport, cell), Effect.result)
        const headers = cell.current === undefined ? {} : rateLimitHeaders(cell.current)
        if (limited._tag === "Failure") return errorResponse(limited.failure, headers)
        const inner = acceptingJson(request)
        const response = yield* quick.answer(inner).pipe(
          Effect.flatMap((answered) =>
            Option.isSome(answered)
              ? Effect.succeed(answered.value)
              : Effect.tap(httpEffect, () =>
                  // After the server's own: they set the session's headers.
                  HttpEffect.appendPreResponseHandler((_request, response) =>
                    Effect.sync(() => {
                      quick.observe(inner, response)
                      return response
                    })
                  )
                )
          ),
          Effect.provideService(HttpServerRequest.HttpServerRequest, inner),
          Effect.provideService(CurrentOwner, owner.success),
          Effect.provideService(CurrentOrigin, originOf(request))
        )
        return HttpServerResponse.setHeaders(response, headers)
      })
  })
)

/** `POST /v1/mcp` (and the session's `DELETE`): the MCP endpoint over Streamable HTTP. */
export const layer = Layer.unwrap(
  Effect.map(Listing, (listing) =>
    McpServer.layerHttp({
      name: "remote-browser-service",
      version: "1.0.0",
      path: MCP_PATH,
      protocols: PROTOCOLS as any,
      allowSessionTermination: true,
      instructions:
        "Remote browsers and sandboxes. Create a session (sessions_create), act on it with the browser_* or sandbox_exec/files_* tools by its session_id, and close it (sessions_close) when done: an open session is billed until it ends.",
      registrations: Layer.mergeAll(Tools, listing as any)
    }).pipe(Layer.provide(Door.layer))
  )
) as unknown as Layer.Layer<
  never,
  never,
  | HttpRouter.HttpRouter
  | Sessions
  | Jobs
  | Workspaces
  | WorkspaceSnapshots
  | SessionDoor
  | SessionKinds
  | Audit
  | Authenticator
  | Policy
  | RateLimits
  | PublicUrls
>
