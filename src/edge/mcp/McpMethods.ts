import { Effect, Schema } from "effect"
import type { HttpServerRequest } from "effect/http"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { Authenticator } from "../guard/Authenticator.ts"
import * as McpCall from "./McpCall.ts"
import {
  type Answer,
  ErrorCode,
  failure,
  invalidParams,
  isProtocol,
  isRecord,
  PROTOCOLS,
  type Protocol,
  result
} from "./McpRpc.ts"
import type { ToolDef } from "./McpTool.ts"
import { TOOLS } from "./McpTools.ts"

export const SERVER_INFO = { name: "remote-browser-service", version: "1.0.0" } as const

export const INSTRUCTIONS =
  "Remote browsers and sandboxes. Create a session (sessions_create), act on it with the browser_* or sandbox_exec/files_* tools by its session_id, and close it (sessions_close) when done: an open session is billed until it ends."

/** What the server offers: tools (their list may change with the caller's access), logging, completions. */
const CAPABILITIES = { logging: {}, tools: { listChanged: true }, completions: {} }

const LOG_LEVELS = new Set(["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"])

/** A tool as `tools/list` describes it, in each revision's shape (2025-03-26 has no titles, a plain input schema). */
const describe = (tool: ToolDef) => {
  const schema = Schema.toJsonSchemaDocument(tool.input).schema as Record<string, unknown>
  const annotations = {
    title: tool.title,
    readOnlyHint: tool.readOnly,
    destructiveHint: tool.destructive,
    idempotentHint: tool.readOnly,
    openWorldHint: tool.name.startsWith("browser_")
  }
  return {
    current: {
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: schema,
      annotations
    },
    legacy: {
      name: tool.name,
      description: tool.description,
      inputSchema: {
        type: "object",
        properties: schema.properties,
        ...(schema.required === undefined ? {} : { required: schema.required })
      },
      annotations
    }
  }
}

/** A lookup of what this server has none of: `notFound` for the name `params[field]`, else invalid parameters. */
const unknownByName = (params: unknown, field: string, notFound: (name: string) => Answer): Answer =>
  isRecord(params) && typeof params[field] === "string"
    ? notFound(params[field])
    : failure(invalidParams.code, invalidParams.message)

/**
 * A tool's result as the revision writes a `CallToolResult`: images in base64; 2025-03-26 has no
 * `structuredContent`. Written as JSON here, in the keys' order, with the structured content's JSON
 * as the tool wrote it, so the record is not serialized a second time.
 */
const callResult = (protocol: Protocol, outcome: McpCall.ToolResult): Answer => {
  const content = outcome.content.map((part) =>
    part.type === "image" ? { ...part, data: Buffer.from(part.data).toString("base64") } : part
  )
  const structured = protocol !== "2025-03-26"
  return {
    _tag: "Result",
    result: {
      content,
      ...(structured ? { structuredContent: outcome.structuredContent } : {}),
      ...(outcome.isError === undefined ? {} : { isError: outcome.isError })
    },
    json:
      `{"content":${JSON.stringify(content)}` +
      (structured ? `,"structuredContent":${outcome.structuredJson}` : "") +
      (outcome.isError === undefined ? "" : `,"isError":${outcome.isError}`) +
      "}"
  }
}

/** `initialize`'s parameters: the client's offer, its capabilities, and who it is. */
const isInitialize = (params: unknown) =>
  isRecord(params) &&
  typeof params.protocolVersion === "string" &&
  isRecord(params.capabilities) &&
  isRecord(params.clientInfo) &&
  typeof params.clientInfo.name === "string" &&
  typeof params.clientInfo.version === "string"

/**
 * The MCP methods the endpoint answers, in a session of `protocol` and as
 * the request's owner: the tools (listed as the caller's access allows, and
 * called through `McpCall` as their routes are), and empty lists of
 * resources and prompts. Nothing here knows HTTP's headers or sessions.
 */
export const make = Effect.gen(function* () {
  const call = yield* McpCall.make
  const authenticator = yield* Authenticator
  const accessOf = McpCall.toolAccess(TOOLS)
  const tools = new Map(TOOLS.map((tool) => [tool.name, { tool, descriptor: describe(tool) }]))

  /** The protocol an `initialize` settles on, with its answer; `undefined` for parameters that are no offer. */
  const initialize = (params: unknown) => {
    if (!isInitialize(params)) return undefined
    const offered = (params as { protocolVersion: string }).protocolVersion
    const protocol: Protocol = isProtocol(offered) ? offered : PROTOCOLS[0]
    return {
      protocol,
      result: {
        protocolVersion: protocol,
        capabilities: CAPABILITIES,
        serverInfo: SERVER_INFO,
        instructions: INSTRUCTIONS
      }
    }
  }

  /** The tools the caller may call: its role, and a scoped key's scopes, hold the tool's route's permission. */
  const listTools = (protocol: Protocol) =>
    Effect.gen(function* () {
      const owner = yield* CurrentOwner
      const listed: Array<unknown> = []
      for (const { tool, descriptor } of tools.values()) {
        const allowed = yield* authenticator.check(owner, accessOf.get(tool.name)!).pipe(
          Effect.as(true),
          Effect.orElseSucceed(() => false)
        )
        if (allowed) listed.push(protocol === "2025-03-26" ? descriptor.legacy : descriptor.current)
      }
      return result({ tools: listed })
    })

  /**
   * A tool's call. One the caller may not make still reaches it and is refused
   * there as its route refuses (403 `forbidden`, audited where the route is).
   */
  const callTool = (protocol: Protocol, params: unknown) => {
    if (
      !isRecord(params) ||
      typeof params.name !== "string" ||
      (params.arguments !== undefined && !isRecord(params.arguments)) ||
      (params._meta !== undefined && !isRecord(params._meta))
    )
      return Effect.succeed(failure(invalidParams.code, invalidParams.message))
    const found = tools.get(params.name)
    if (found === undefined)
      return Effect.succeed(failure(ErrorCode.invalidParams, `Tool '${params.name}' not found`))
    return Effect.map(call(found.tool, params.arguments), (outcome) => callResult(protocol, outcome))
  }

  /** The answer to a request in a session of `protocol` (`initialize` is the transport's: it opens the session). */
  const request = (
    protocol: Protocol,
    method: string,
    params: unknown
  ): Effect.Effect<Answer, never, CurrentOwner | HttpServerRequest.HttpServerRequest> => {
    const invalid = failure(invalidParams.code, invalidParams.message)
    switch (method) {
      case "tools/call":
        return callTool(protocol, params)
      case "tools/list":
        return listTools(protocol)
      case "ping":
        return Effect.succeed(result({}))
      case "resources/list":
        return Effect.succeed(result({ resources: [] }))
      case "resources/templates/list":
        return Effect.succeed(result({ resourceTemplates: [] }))
      case "prompts/list":
        return Effect.succeed(result({ prompts: [] }))
      case "resources/read":
        return Effect.succeed(
          unknownByName(params, "uri", (uri) =>
            failure(ErrorCode.resourceNotFound, `Resource '${uri}' not found`)
          )
        )
      case "resources/subscribe":
      case "resources/unsubscribe":
        return Effect.succeed(failure(ErrorCode.methodNotFound, "Resource subscriptions are not supported"))
      case "prompts/get":
        return Effect.succeed(
          unknownByName(params, "name", (name) =>
            failure(ErrorCode.invalidParams, `Prompt '${name}' not found`)
          )
        )
      case "completion/complete":
        return Effect.succeed(
          isRecord(params) && isRecord(params.ref) && isRecord(params.argument)
            ? failure(ErrorCode.invalidParams, "Unknown completion reference or argument")
            : invalid
        )
      case "logging/setLevel":
        // No log is sent to the client: the level is taken and has nothing to filter.
        return Effect.succeed(
          isRecord(params) && LOG_LEVELS.has(params.level as string) ? result({}) : invalid
        )
      default:
        return Effect.succeed(failure(ErrorCode.methodNotFound, `Method not found: ${method}`))
    }
  }

  return { initialize, request }
})
