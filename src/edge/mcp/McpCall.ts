import { Cause, Context, Effect, Option, Predicate, Schema } from "effect"
import { HttpServerRequest } from "effect/http"
import { HttpApi } from "effect/http-api"
import { Api } from "../http/Api.ts"
import { type Access, RequiredAccess, routeTable } from "../../features/policy/Access.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { Authenticator } from "../guard/Authenticator.ts"
import { notFoundOf } from "../guard/InputGuard.ts"
import { Jobs } from "../../features/jobs/Jobs.ts"
import { Sessions } from "../../features/sessions/Sessions.ts"
import type { ToolAnswer, ToolDef } from "./McpTool.ts"
import { TOOLS } from "./McpTools.ts"
import * as RestCall from "./RestCall.ts"

/** A tool's result as MCP's `CallToolResult` writes it (images still as bytes). */
export interface ToolResult {
  readonly content: ReadonlyArray<
    | { readonly type: "text"; readonly text: string }
    | { readonly type: "image"; readonly data: Uint8Array; readonly mimeType: string }
  >
  readonly structuredContent: unknown
  readonly isError?: true
}

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

/** What `io.read` needs of a GET route: its access, its one success schema's encoder, its 404. */
interface ReadRoute {
  readonly access: Access
  readonly encode: (value: unknown) => Effect.Effect<unknown, Schema.SchemaError>
  readonly notFound: unknown
}

/** The GET routes that answer with one schema and say what they require, by `METHOD /path/{param}`. */
const readRoutes = (): ReadonlyMap<string, ReadRoute> => {
  const found = new Map<string, ReadRoute>()
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, mergedAnnotations }) => {
      const [only, ...more] = [...endpoint.success]
      const access = Context.getOption(mergedAnnotations, RequiredAccess)
      if (endpoint.method !== "GET" || only === undefined || more.length > 0 || Option.isNone(access)) return
      found.set(`${endpoint.method} ${endpoint.path.replace(/:(\w+)/g, "{$1}")}`, {
        access: access.value,
        encode: Schema.encodeUnknownEffect(only as Schema.Codec<unknown, unknown>),
        notFound: notFoundOf(endpoint)
      })
    }
  })
  return found
}

/** A tool's answer as MCP renders it: JSON text plus `structuredContent`, images as image content. */
export const resultOf = (answer: ToolAnswer): ToolResult => {
  if (answer._tag === "Refused") {
    const error = { code: answer.code, message: answer.message }
    return {
      isError: true,
      content: [{ type: "text", text: JSON.stringify({ error }) }],
      structuredContent: { error, status: answer.status }
    }
  }
  return {
    content: [
      { type: "text", text: JSON.stringify(answer.record) },
      ...(answer.images ?? []).map((image) => ({
        type: "image" as const,
        data: image.data,
        mimeType: image.mimeType
      }))
    ],
    structuredContent: answer.record
  }
}

/** An error the service raised (status, code and message of its own) as a tool's refusal. */
export const refusalOf = (error: unknown): ToolAnswer | undefined =>
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

/** A service's answer as a tool's: the record, or the refusal it failed with (else a defect). */
const answered = <A>(effect: Effect.Effect<A, unknown>, toRecord: (value: A) => Effect.Effect<ToolAnswer>) =>
  effect.pipe(
    Effect.flatMap(toRecord),
    Effect.catch((error) => {
      const refusal = refusalOf(error)
      return refusal === undefined ? Effect.die(error) : Effect.succeed(refusal)
    })
  )

const asRecord = (value: unknown): Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : { value }

/**
 * Calls the tools as the request's owner: the arguments decoded against the
 * tool's input (a bad one is the tool's answer, `isError`, as MCP 2025-11-25
 * asks, not a protocol error), then the tool run with its ways to act. A defect
 * is logged and answered as the routes answer one (500 `internal_error`).
 */
export const make = Effect.gen(function* () {
  const rest = yield* RestCall.make
  const sessions = yield* Sessions
  const jobs = yield* Jobs
  const authenticator = yield* Authenticator
  const accessOf = toolAccess(TOOLS)
  const reads = readRoutes()
  const decoders = new Map(
    TOOLS.map((tool) => [tool.name, Schema.decodeUnknownEffect(tool.input as Schema.Codec<any, unknown>)])
  )

  return (tool: ToolDef, payload: unknown) =>
    Effect.gen(function* () {
      const decoded = yield* Effect.result(
        decoders.get(tool.name)!(payload ?? {}, { errors: "first", onExcessProperty: "error" })
      )
      if (decoded._tag === "Failure") return resultOf(invalidArguments(decoded.failure))
      const owner = yield* CurrentOwner
      const request = yield* HttpServerRequest.HttpServerRequest
      const check = authenticator.check(owner, accessOf.get(tool.name)!)
      const answer = yield* tool.run(decoded.success, {
        rest: (call) => rest(request, call),
        drive: (sessionId, action) =>
          answered(Effect.andThen(check, sessions.drive(owner, sessionId, action)), (value) =>
            Effect.succeed<ToolAnswer>({ _tag: "Record", record: asRecord(value) })
          ),
        read: ([method, path], id, get) => {
          const route = reads.get(`${method} ${path}`)
          // A tool reading what no GET route answers is a bug.
          if (route === undefined)
            return Effect.die(new Error(`MCP tool ${tool.name}: no read route ${path}`))
          // Postgres names nothing by an id holding U+0000: the route's 404, as its guard answers.
          const found = id.includes("\u0000") ? Effect.fail(route.notFound) : get({ owner, sessions, jobs })
          return answered(Effect.andThen(authenticator.check(owner, route.access), found), (value) =>
            Effect.map(Effect.orDie(route.encode(value)), (encoded) => ({
              _tag: "Record" as const,
              record: asRecord(encoded)
            }))
          )
        }
      })
      return resultOf(answer)
    }).pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause) || Option.isSome(Cause.findErrorOption(cause))
          ? Effect.failCause(cause)
          : Effect.logError("mcp.tool_failed", { tool: tool.name, cause }).pipe(
              Effect.as(
                resultOf({ _tag: "Refused", status: 500, code: "internal_error", message: "Internal error." })
              )
            )
      )
    ) as Effect.Effect<ToolResult, never, CurrentOwner | HttpServerRequest.HttpServerRequest>
})
