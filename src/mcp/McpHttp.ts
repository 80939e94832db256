import { Cause, Context, Effect, Layer, Option, Predicate, Schema } from "effect"
import { McpProtocol, McpSchema, McpServer } from "effect/ai"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Api } from "../Api.ts"
import { access, type Access, routeTable } from "../auth/Access.ts"
import { CurrentOrigin, CurrentOwner, CurrentVouched, SESSION_COOKIE } from "../auth/AuthMiddleware.ts"
import { connectToken } from "../auth/Credentials.ts"
import { Authenticator, originOf } from "../auth/AuthMiddlewareLive.ts"
import { ServiceConfig } from "../Config.ts"
import { principalKey } from "../domain/Owner.ts"
import { errorResponse } from "../http/ErrorResponses.ts"
import { authorizeRaw } from "../http/RawAuth.ts"
import { RateLimitReport, type RateLimitReportCell, rateLimitHeaders } from "../limits/RateLimitReport.ts"
import { RateLimits } from "../limits/RateLimits.ts"
import { Sessions } from "../sessions/Sessions.ts"
import { type ToolAnswer, type ToolDef, TOOLS } from "./McpTools.ts"
import * as RestCall from "./RestCall.ts"

export const MCP_PATH = "/v1/mcp"

/** The MCP revisions served, newest first; the client's offer picks one. */
const PROTOCOLS = [McpProtocol.v2025_11_25, McpProtocol.v2025_06_18, McpProtocol.v2025_03_26] as const

/** The access each tool requires: its route's, read from the API's own annotations. */
export const toolAccess = (tools: ReadonlyArray<ToolDef>): ReadonlyMap<string, Access> => {
  const routes = new Map(routeTable(Api).map((row) => [`${row.method} ${row.path}`, row.access]))
  return new Map(
    tools.map((tool) => {
      const found = routes.get(`${tool.route.method} ${tool.route.path}`)
      // A tool bound to a route that does not exist (or says nothing of its access) is a bug: fail at start.
      if (found === undefined)
        throw new Error(`MCP tool ${tool.name}: no route ${tool.route.method} ${tool.route.path}`)
      return [tool.name, found]
    })
  )
}

const errorOf = (status: number, code: string, message: string) => ({ error: { code, message }, status })

/** A tool's answer as MCP renders it: JSON text plus `structuredContent`, images as image content. */
const resultOf = (answer: ToolAnswer): McpSchema.CallToolResult => {
  if (answer._tag === "Refused") {
    const body = errorOf(answer.status, answer.code, answer.message)
    return new McpSchema.CallToolResult({
      isError: true,
      content: [{ type: "text", text: JSON.stringify({ error: body.error }) }],
      structuredContent: body
    })
  }
  return new McpSchema.CallToolResult({
    content: [
      { type: "text", text: JSON.stringify(answer.record) },
      ...(answer.images ?? []).map((image) => ({
        type: "image" as const,
        data: image.data,
        mimeType: image.mimeType
      }))
    ],
    structuredContent: answer.record
  })
}

/** An error the service raised (status, code and message of its own) as a tool's refusal. */
const refusalOf = (error: unknown): ToolAnswer | undefined =>
  Predicate.hasProperty(error, "status") &&
  Predicate.hasProperty(error, "code") &&
  typeof error.status === "number" &&
  typeof error.code === "string"
    ? {
        _tag: "Refused",
        status: error.status,
        code: error.code,
        message: String((error as unknown as Error).message)
      }
    : undefined

/** The first problem of a tool's arguments, named as the REST routes name it (400 `invalid_field`). */
const invalidArguments = (error: Schema.SchemaError): ToolAnswer => {
  const field = /at \[?"?([\w.]+)/.exec(error.message)?.[1]
  return field === undefined
    ? { _tag: "Refused", status: 400, code: "invalid_request", message: "Request body is malformed." }
    : { _tag: "Refused", status: 400, code: "invalid_field", message: `Invalid value for field: ${field}.` }
}

/** Registers every tool with the server; each call runs as the request's owner. */
const Tools = Layer.effectDiscard(
  Effect.gen(function* () {
    const server = yield* McpServer.McpServer
    const rest = yield* RestCall.make
    const sessions = yield* Sessions
    const authenticator = yield* Authenticator
    const accessOf = toolAccess(TOOLS)
    for (const tool of TOOLS) {
      const required = accessOf.get(tool.name)!
      const decode = Schema.decodeUnknownEffect(tool.input as Schema.Codec<any, unknown>)
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
          Effect.gen(function* () {
            // Invalid arguments are the tool's answer (isError), as MCP 2025-11-25 asks, not a protocol error.
            const decoded = yield* Effect.result(
              decode(payload ?? {}, { errors: "first", onExcessProperty: "error" })
            )
            if (decoded._tag === "Failure") return resultOf(invalidArguments(decoded.failure))
            const input = decoded.success
            const owner = yield* CurrentOwner
            const request = yield* HttpServerRequest.HttpServerRequest
            const answer = yield* tool.run(input, {
              rest: (call) => rest(request, call),
              drive: (sessionId, action) =>
                authenticator.check(owner, required).pipe(
                  Effect.andThen(sessions.drive(owner, sessionId, action)),
                  Effect.map((value): ToolAnswer => ({
                    _tag: "Record",
                    record:
                      value !== null && typeof value === "object" && !Array.isArray(value)
                        ? (value as Record<string, unknown>)
                        : { value }
                  })),
                  Effect.catch((error) => Effect.succeed(refusalOf(error) ?? Effect.die(error)) as any)
                ) as Effect.Effect<ToolAnswer>
            })
            return resultOf(answer)
          }).pipe(
            Effect.catchCause((cause) =>
              Cause.hasInterruptsOnly(cause) || Option.isSome(Cause.findErrorOption(cause))
                ? Effect.failCause(cause)
                : Effect.logError("mcp.tool_failed", { tool: tool.name, cause }).pipe(
                    Effect.as(
                      resultOf({
                        _tag: "Refused",
                        status: 500,
                        code: "internal_error",
                        message: "Internal error."
                      })
                    )
                  )
            )
          ) as any
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
  const accessOf = toolAccess(TOOLS)
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
    const limits = yield* RateLimits
    const authenticator = yield* Authenticator
    const { publicUrl } = yield* ServiceConfig
    const publicOrigin = new URL(publicUrl).origin
    return (httpEffect) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const owner = yield* authorizeRaw(request, access(null), publicOrigin).pipe(
          Effect.provideService(Authenticator, authenticator),
          Effect.result
        )
        if (owner._tag === "Failure") return errorResponse(owner.failure)
        const cell: RateLimitReportCell = { current: undefined }
        const limited = yield* limits
          .consume("mcp", `${owner.success.accountId}:${principalKey(owner.success.principal)}`)
          .pipe(Effect.provideService(RateLimitReport, cell), Effect.result)
        const headers = cell.current === undefined ? {} : rateLimitHeaders(cell.current)
        if (limited._tag === "Failure") return errorResponse(limited.failure, headers)
        // The tools' REST calls carry the same credential: proven once, here.
        const token = connectToken(request)
        const credential = token !== "" ? token : request.cookies[SESSION_COOKIE]
        const response = yield* httpEffect.pipe(
          Effect.provideService(
            CurrentVouched,
            credential === undefined ? undefined : { credential, principal: owner.success.principal }
          ),
          Effect.provideService(HttpServerRequest.HttpServerRequest, acceptingJson(request)),
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
  HttpRouter.HttpRouter | Sessions | Authenticator | RateLimits | ServiceConfig
>
