import { Cause, Effect, Option, Predicate, type Result, Schema } from "effect"
import { HttpServerRequest } from "effect/http"
import { HttpApi } from "effect/http-api"
import { Api } from "../http/Api.ts"
import type { Access } from "../../features/policy/Access.ts"
import { RAW_ROUTES, routeTable } from "../guard/RawRoutes.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { Authenticator } from "../guard/Authenticator.ts"
import { notFoundOf } from "../guard/InputGuard.ts"
import { type RouteRules, Policy, rulesOf } from "../guard/Policy.ts"
import { SessionNotFound } from "../../kernel/Errors.ts"
import { unstorableTextError, unstorableTextPath } from "../../kernel/Validation.ts"
import { Jobs } from "../../features/jobs/Jobs.ts"
import { SandboxCalls } from "../../features/sessions/SandboxCalls.ts"
import { Sessions } from "../../features/sessions/Sessions.ts"
import { Workspaces } from "../../features/workspaces/Workspaces.ts"
import { WorkspaceSnapshots } from "../../features/workspaces/WorkspaceSnapshots.ts"
import type { ToolAnswer, ToolDef, ToolIo } from "./McpTool.ts"
import { TOOLS } from "./McpTools.ts"

/** A tool's result as MCP's `CallToolResult` writes it (images still as bytes). */
export interface ToolResult {
  readonly content: ReadonlyArray<
    | { readonly type: "text"; readonly text: string }
    | { readonly type: "image"; readonly data: Uint8Array; readonly mimeType: string }
  >
  readonly structuredContent: unknown
  /** `structuredContent` as JSON text: a record's is its text content's, written once for both. */
  readonly structuredJson: string
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

/** What a tool takes of its route: its rules, its 404, and its success schemas' encoder (if any). */
interface ToolRoute {
  readonly rules: RouteRules
  readonly notFound: unknown
  readonly encode: ((value: unknown) => Result.Result<unknown, Schema.SchemaError>) | undefined
}

/** The routes that say what they require, by `METHOD /path/{param}`, and the raw routes by their access alone. */
const toolRoutes = (): ReadonlyMap<string, ToolRoute> => {
  const found = new Map<string, ToolRoute>()
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, mergedAnnotations }) => {
      const rules = rulesOf(mergedAnnotations)
      if (Option.isNone(rules)) return
      const [only, ...more] = [...endpoint.success]
      found.set(`${endpoint.method} ${endpoint.path.replace(/:(\w+)/g, "{$1}")}`, {
        rules: rules.value,
        notFound: notFoundOf(endpoint),
        // A route with several answers (exec: the command's end, or one started) encodes by the first that fits.
        encode:
          only === undefined
            ? undefined
            : Schema.encodeUnknownResult(
                (more.length === 0 ? only : Schema.Union([only, ...more])) as Schema.Codec<unknown, unknown>
              )
      })
    }
  })
  for (const row of RAW_ROUTES) {
    const key = `${row.method} ${row.path}`
    if (!found.has(key))
      found.set(key, {
        rules: { access: row.access, limit: undefined },
        notFound: new SessionNotFound(),
        encode: undefined
      })
  }
  return found
}

/** A tool's answer as MCP renders it: JSON text plus `structuredContent`, images as image content. */
export const resultOf = (answer: ToolAnswer): ToolResult => {
  if (answer._tag === "Refused") {
    const error = { code: answer.code, message: answer.message }
    const structuredContent = { error, status: answer.status }
    return {
      isError: true,
      content: [{ type: "text", text: JSON.stringify({ error }) }],
      structuredContent,
      structuredJson: JSON.stringify(structuredContent)
    }
  }
  const text = JSON.stringify(answer.record)
  return {
    content: [
      { type: "text", text },
      ...(answer.images ?? []).map((image) => ({
        type: "image" as const,
        data: image.data,
        mimeType: image.mimeType
      }))
    ],
    structuredContent: answer.record,
    structuredJson: text
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

/** A tool's arguments are decoded as a route's body is: the first problem named, an unknown field refused. */
const DECODE_OPTIONS = { errors: "first", onExcessProperty: "error" } as const

/** The first field of `input` holding text Postgres cannot store, as the routes answer it (400). */
const unstorable = (input: unknown) => Option.fromUndefinedOr(unstorableTextPath(input))

/**
 * Calls the tools as the request's owner: the arguments decoded against the
 * tool's input (a bad one is the tool's answer, `isError`, as MCP 2025-11-25
 * asks, not a protocol error), then, as its route would: the access check
 * (a refusal or failure of a mutation audited), a path parameter Postgres
 * cannot name answered with the route's 404 and unstorable text with its 400,
 * the route's rate limit, and the tool's use case. A refusal is the tool's
 * answer with the route's status, code and message; a defect is logged and
 * answered as the routes answer one (500 `internal_error`).
 */
export const make = Effect.gen(function* () {
  const sessions = yield* Sessions
  const jobs = yield* Jobs
  const workspaces = yield* Workspaces
  const snapshots = yield* WorkspaceSnapshots
  const authenticator = yield* Authenticator
  const policy = yield* Policy
  const sandbox = yield* SandboxCalls
  const routes = toolRoutes()
  const routeOf = (method: string, path: string) => {
    const route = routes.get(`${method} ${path}`)
    // A tool bound to a route that does not exist (or says nothing of its access) is a bug: fail at start.
    if (route === undefined) throw new Error(`MCP: no route ${method} ${path}`)
    return route
  }
  /** Each tool's route and input decoder, found once. */
  const bound = new Map(
    TOOLS.map((tool) => [
      tool.name,
      {
        route: routeOf(tool.route.method, tool.route.path),
        decode: Schema.decodeUnknownResult(tool.input as Schema.Codec<any, unknown>)
      }
    ])
  )

  return (tool: ToolDef, payload: unknown) =>
    Effect.gen(function* () {
      const { route, decode } = bound.get(tool.name)!
      // Decoded (and its record encoded, below) synchronously, to a Result: the schemas need no
      // service, and the Effect parser's fiber cost a read about 40 µs of CPU (bench/mcp).
      const decoded = decode(payload ?? {}, DECODE_OPTIONS)
      if (decoded._tag === "Failure") return resultOf(invalidArguments(decoded.failure))
      const input = decoded.success
      const owner = yield* CurrentOwner
      const params = tool.params(input)
      const audited = route.rules.access.audit
      const io: ToolIo = {
        owner,
        sessions,
        jobs,
        workspaces,
        snapshots,
        sandbox,
        record: (value, other) => {
          const encode = (other === undefined ? route : routeOf(other[0], other[1])).encode
          // A tool recording what its route does not answer with one schema is a bug.
          if (encode === undefined) return Effect.die(new Error(`MCP tool ${tool.name}: no record schema`))
          const encoded = encode(value)
          return encoded._tag === "Failure"
            ? Effect.die(encoded.failure)
            : Effect.succeed({ _tag: "Record" as const, record: asRecord(encoded.success) })
        },
        may: ([method, path]) =>
          authenticator.check(owner, routeOf(method, path).rules.access).pipe(
            Effect.as(true),
            Effect.orElseSucceed(() => false)
          )
      }
      const answer = yield* policy
        .admit(
          owner,
          route.rules.access,
          audited?.targetParam === null || audited === null ? undefined : params[audited.targetParam],
          Effect.suspend(() => {
            // Postgres names nothing by an id holding U+0000: the route's 404, as its guard answers.
            if (Object.values(params).some((value) => value.includes("\u0000")))
              return Effect.fail(route.notFound)
            const text = tool.checksText ? unstorable(input) : Option.none()
            if (Option.isSome(text)) return Effect.fail(unstorableTextError(text.value))
            return Effect.andThen(policy.spend(owner, route.rules.limit, params.id), () =>
              tool.run(input, io)
            )
          })
        )
        .pipe(
          Effect.catch((error) => {
            const refusal = refusalOf(error)
            return refusal === undefined ? Effect.die(error) : Effect.succeed(refusal)
          })
        )
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

const asRecord = (value: unknown): Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : { value }
