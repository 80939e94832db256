import { type Effect, Schema } from "effect"
import type { Owner } from "../../kernel/Owner.ts"
import type { Jobs } from "../../features/jobs/Jobs.ts"
import type { SandboxCalls } from "../../features/sessions/SandboxCalls.ts"
import type { Sessions } from "../../features/sessions/Sessions.ts"
import type { Workspaces } from "../../features/workspaces/Workspaces.ts"
import type { WorkspaceSnapshots } from "../../features/workspaces/WorkspaceSnapshots.ts"

/** What a tool answers: a record (shown as JSON text and `structuredContent`), images beside it. */
export type ToolAnswer =
  | {
      readonly _tag: "Record"
      readonly record: Record<string, unknown>
      readonly images?: ReadonlyArray<{ readonly data: Uint8Array; readonly mimeType: string }>
    }
  /** The route's refusal, in the API's error shape with its HTTP status. */
  | { readonly _tag: "Refused"; readonly status: number; readonly code: string; readonly message: string }

/** A route as the route table writes it: `["GET", "/v1/sessions/{id}"]`. */
export type Route = readonly [method: string, path: string]

/**
 * What a tool acts with: the use cases its route's handler calls, as the
 * caller (`owner`). Its route's access, audit of a refusal and rate limit are
 * applied before `run` (`McpCall`), the same `Policy` the route applies; a
 * use case's refusal is the tool's, with the route's status and body.
 */
export interface ToolIo {
  readonly owner: Owner
  readonly sessions: Sessions["Service"]
  readonly jobs: Jobs["Service"]
  readonly workspaces: Workspaces["Service"]
  readonly snapshots: WorkspaceSnapshots["Service"]
  /** A sandbox's calls (commands, files), answered where the session runs. */
  readonly sandbox: SandboxCalls["Service"]
  /** `value` as `route` (default the tool's) answers it: encoded with its success schema. */
  readonly record: (value: unknown, route?: Route) => Effect.Effect<ToolAnswer>
  /** Whether the caller may call `route` (a tool that reads what it made). */
  readonly may: (route: Route) => Effect.Effect<boolean>
}

export interface ToolDef {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly input: Schema.Top & Schema.Codec<any, any>
  /** The route (as the route table writes it) whose access, audit and rate limit the tool takes. */
  readonly route: { readonly method: string; readonly path: string }
  /** The route's path parameters in the tool's input (the audited target, the session a limit counts). */
  readonly params: (input: any) => Readonly<Record<string, string>>
  /**
   * Whether its input reaches the route as JSON or a query, where text that
   * Postgres cannot store (U+0000, a lone surrogate) is refused with 400
   * `invalid_field` before the route runs; not for a page's input or a file's bytes.
   */
  readonly checksText: boolean
  readonly readOnly: boolean
  readonly destructive: boolean
  readonly run: (input: any, io: ToolIo) => Effect.Effect<ToolAnswer, unknown>
}

export const define = <S extends Schema.Top & Schema.Codec<any, any>>(def: {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly input: S
  readonly route: readonly [method: string, path: string]
  readonly params?: (input: S["Type"]) => Readonly<Record<string, string>>
  readonly checksText?: boolean
  readonly readOnly?: boolean
  readonly destructive?: boolean
  readonly run: (input: S["Type"], io: ToolIo) => Effect.Effect<ToolAnswer, unknown>
}): ToolDef => ({
  name: def.name,
  title: def.title,
  description: def.description,
  input: def.input,
  route: { method: def.route[0], path: def.route[1] },
  params: def.params ?? (() => ({})),
  checksText: def.checksText ?? true,
  readOnly: def.readOnly ?? false,
  destructive: def.destructive ?? false,
  run: def.run
})

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
