import { Effect, Option } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import type { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import type { ToolDef } from "./McpTool.ts"
import type { ToolResult } from "./McpCall.ts"

const SESSION_HEADER = "mcp-session-id"
const PROTOCOL_HEADER = "mcp-protocol-version"
/** Sessions remembered; past this the oldest is forgotten (its calls then take the server's path). */
const MAX_SESSIONS = 10_000

/** The revisions whose `CallToolResult` carries `structuredContent`, as the quick path writes it. */
const QUICK_PROTOCOLS = new Set(["2025-06-18", "2025-11-25"])

/** A header's media types, as the server reads them: one with `q=0` (or a `q` out of range) is refused. */
const mediaTypes = (header: string | undefined) =>
  (header ?? "").split(",").flatMap((part) => {
    const [type = "", ...parameters] = part.split(";")
    const quality = parameters.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith("q="))
    if (quality !== undefined) {
      const value = Number(quality.slice(2))
      if (!Number.isFinite(value) || value <= 0 || value > 1) return []
    }
    return [type.trim().toLowerCase()]
  })

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)

type Caller = (
  tool: ToolDef,
  payload: unknown
) => Effect.Effect<ToolResult, never, CurrentOwner | HttpServerRequest.HttpServerRequest>

/**
 * A result as the server's JSON-RPC encoding writes it: images as base64, the fields in
 * `CallToolResult`'s order (`content`, `structuredContent`, then `isError`).
 */
const toJson = (result: ToolResult) => ({
  content: result.content.map((part) =>
    part.type === "image" ? { ...part, data: Buffer.from(part.data).toString("base64") } : part
  ),
  structuredContent: result.structuredContent,
  ...(result.isError === undefined ? {} : { isError: result.isError })
})

/**
 * The endpoint's quick path: a `tools/call` of an `instant` tool (a read of
 * one record, milliseconds long, with nothing to cancel and no progress to
 * report) in a session this node opened is answered here, by the same tool
 * call the MCP server makes, without the server's JSON-RPC machinery, which
 * costs more than the read (see bench/mcp). Everything else (initialize,
 * lists, notifications, other tools, batches, an `Origin`, any `_meta`,
 * arguments that are no object, an unknown session or one on 2025-03-26 (whose
 * results carry no `structuredContent`), a protocol header other than the
 * session's, media types the server would refuse, anything malformed) takes
 * the server's path, which decides it as before: the quick path only ever
 * answers what the server would answer the same way.
 *
 * The sessions are learnt from the server's own answers: an `initialize`
 * answered with a session id (and its protocol version), a `DELETE` answered
 * 204 (a call answered after it is the server's 404). The server keeps its
 * sessions until they are deleted or the process ends, as this map does.
 */
export const make = (tools: ReadonlyArray<ToolDef>, call: Caller) => {
  const instant = new Map(tools.filter((tool) => tool.instant).map((tool) => [tool.name, tool]))
  const sessions = new Map<string, string>()

  /** The session's protocol when the request's headers admit the quick path (its body is read only then). */
  const admits = (request: HttpServerRequest.HttpServerRequest): string | undefined => {
    if (request.method !== "POST" || request.headers.origin !== undefined) return undefined
    const session = request.headers[SESSION_HEADER]
    const protocol = session === undefined ? undefined : sessions.get(session)
    if (protocol === undefined) return undefined
    const version = request.headers[PROTOCOL_HEADER]
    if (version !== undefined && version !== protocol) return undefined
    if (mediaTypes(request.headers["content-type"])[0] !== "application/json") return undefined
    const accepted = mediaTypes(request.headers.accept)
    return accepted.includes("application/json") && accepted.includes("text/event-stream")
      ? protocol
      : undefined
  }

  /** The answer of the quick path, or none when the server's path must decide. */
  const answer = (request: HttpServerRequest.HttpServerRequest) =>
    Effect.gen(function* () {
      const protocol = admits(request)
      if (protocol === undefined) return Option.none()
      const session = request.headers[SESSION_HEADER]!
      const text = yield* Effect.result(request.text)
      if (text._tag === "Failure") return Option.none()
      let message: any
      try {
        message = JSON.parse(text.success)
      } catch {
        return Option.none()
      }
      // A `_meta` (a progress token, a protocol claim) and arguments of another shape are the server's.
      if (
        !isPlainObject(message) ||
        message.jsonrpc !== "2.0" ||
        message.method !== "tools/call" ||
        (typeof message.id !== "string" && typeof message.id !== "number") ||
        !isPlainObject(message.params) ||
        message.params._meta !== undefined ||
        (message.params.arguments !== undefined && !isPlainObject(message.params.arguments))
      )
        return Option.none()
      const tool = typeof message.params.name === "string" ? instant.get(message.params.name) : undefined
      if (tool === undefined) return Option.none()
      const result = yield* call(tool, message.params.arguments)
      // Ended meanwhile: the server answers a call whose session is gone 404.
      if (!sessions.has(session)) return Option.some(HttpServerResponse.empty({ status: 404 }))
      // Ended by a newline, as the server's HTTP encoding ends each message.
      const body = `${JSON.stringify({ jsonrpc: "2.0", id: message.id, result: toJson(result) })}\n`
      return Option.some(
        HttpServerResponse.text(body, {
          contentType: "application/json",
          headers: { [PROTOCOL_HEADER]: protocol }
        })
      )
    })

  /** Learns the sessions the server opens and ends, from its answers. */
  const observe = (
    request: HttpServerRequest.HttpServerRequest,
    response: HttpServerResponse.HttpServerResponse
  ) => {
    if (request.method === "DELETE") {
      const session = request.headers[SESSION_HEADER]
      if (response.status === 204 && session !== undefined) sessions.delete(session)
      return
    }
    // Only an `initialize` (a POST without a session) opens one: a call still answered after its
    // session's DELETE must not bring it back.
    if (request.headers[SESSION_HEADER] !== undefined) return
    const opened = response.headers[SESSION_HEADER]
    const protocol = response.headers[PROTOCOL_HEADER]
    if (opened === undefined || protocol === undefined || !QUICK_PROTOCOLS.has(protocol)) return
    if (sessions.size >= MAX_SESSIONS) sessions.delete(sessions.keys().next().value!)
    sessions.set(opened, protocol)
  }

  return { answer, observe }
}
