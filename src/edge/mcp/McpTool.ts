import { type Effect, Schema } from "effect"
import type { PageAction } from "../../runtime/Drive.ts"
import type { Owner } from "../../kernel/Owner.ts"
import type { Jobs } from "../../features/jobs/Jobs.ts"
import type { Sessions } from "../../features/sessions/Sessions.ts"
import { jsonOf, type RestAnswer, type RestRequest } from "./RestCall.ts"

/** What a tool answers: a record (shown as JSON text and `structuredContent`), images beside it. */
export type ToolAnswer =
  | {
      readonly _tag: "Record"
      readonly record: Record<string, unknown>
      readonly images?: ReadonlyArray<{ readonly data: Uint8Array; readonly mimeType: string }>
    }
  /** The route's refusal, in the spec's shape with its HTTP status. */
  | { readonly _tag: "Refused"; readonly status: number; readonly code: string; readonly message: string }

/** The services a read answers from: those the read routes' handlers call. */
export interface ReadServices {
  readonly owner: Owner
  readonly sessions: Sessions["Service"]
  readonly jobs: Jobs["Service"]
}

/** A route as the route table writes it: `["GET", "/v1/sessions/{id}"]`. */
export type Route = readonly [method: string, path: string]

/**
 * What a tool may do: call a REST route as the caller; act on a browser
 * session's page; or read a record of a GET `route` by the same service call
 * its handler makes, without a second pass through the router: that route's
 * access is checked first, an id it could not name is its 404, and the value is
 * encoded with its own success schema, so the record is the route's byte for
 * byte (a read route has no rate limit and no audit entry to reproduce).
 */
export interface ToolIo {
  readonly rest: (request: RestRequest) => Effect.Effect<RestAnswer>
  readonly drive: (sessionId: string, action: PageAction) => Effect.Effect<ToolAnswer>
  readonly read: (
    route: Route,
    id: string,
    get: (services: ReadServices) => Effect.Effect<unknown, unknown>
  ) => Effect.Effect<ToolAnswer>
}

export interface ToolDef {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly input: Schema.Top & Schema.Codec<any, any>
  /** The route (as the route table writes it) whose access the tool requires. */
  readonly route: { readonly method: string; readonly path: string }
  readonly readOnly: boolean
  readonly destructive: boolean
  /**
   * A read of one record (`io.read` alone): milliseconds, nothing to cancel or
   * report progress on, so the endpoint's quick path may answer it.
   */
  readonly instant: boolean
  readonly run: (input: any, io: ToolIo) => Effect.Effect<ToolAnswer>
}

export const define = <S extends Schema.Top & Schema.Codec<any, any>>(def: {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly input: S
  readonly route: readonly [method: string, path: string]
  readonly readOnly?: boolean
  readonly destructive?: boolean
  readonly instant?: boolean
  readonly run: (input: S["Type"], io: ToolIo) => Effect.Effect<ToolAnswer>
}): ToolDef => ({
  name: def.name,
  title: def.title,
  description: def.description,
  input: def.input,
  route: { method: def.route[0], path: def.route[1] },
  readOnly: def.readOnly ?? false,
  destructive: def.destructive ?? false,
  instant: def.instant ?? false,
  run: def.run
})

/** A route's answer as a tool's: its JSON record, or its `{ error: { code, message } }`. */
export const answerOf = (answer: RestAnswer, record?: Record<string, unknown>): ToolAnswer => {
  const json = jsonOf(answer) as any
  if (answer.status >= 400) {
    return {
      _tag: "Refused",
      status: answer.status,
      code: typeof json?.error?.code === "string" ? json.error.code : "internal_error",
      message: typeof json?.error?.message === "string" ? json.error.message : `HTTP ${answer.status}`
    }
  }
  return {
    _tag: "Record",
    record: record ?? (json !== null && typeof json === "object" ? json : { result: json })
  }
}

export const seg = encodeURIComponent

export const query = (params: Record<string, string | number | undefined>) => {
  const search = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) if (value !== undefined) search.set(key, String(value))
  const text = search.toString()
  return text === "" ? "" : `?${text}`
}

export const described = <S extends Schema.Top>(schema: S, description: string) =>
  schema.annotate({ description })

export const SessionId = described(Schema.String, "The session's id (`sess_...`).")
export const WorkspaceRef = described(Schema.String, "A workspace's name or id.")
