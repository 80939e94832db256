import { Effect, Schema } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import type { SqlClient } from "effect/sql"
import {
  type AssistantInfo,
  AssistantNotFound,
  MAX_CONFIG_BYTES,
  RuntimeCommand
} from "../../kernel/Assistant.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import { isUuid } from "../../kernel/Ids.ts"
import type { Owner } from "../../kernel/Owner.ts"

export interface AssistantRow {
  readonly id: string
  readonly account_id: string
  readonly name: string
  readonly image: string | null
  readonly config: Record<string, unknown>
  readonly config_version: number
  readonly status: "running" | "paused"
  readonly workspace_id: string
  readonly session_id: string | null
  readonly last_error: string | null
  readonly restarts: number
  readonly runtime_state: Record<string, unknown>
  readonly state_version: string | number
  readonly created_at: Date
  readonly updated_at: Date
  /** Read with `withLinks`; absent on a row an INSERT or UPDATE returned. */
  readonly links?: ReadonlyArray<{
    readonly provider: string
    readonly subject: string
    readonly email: string | null
    readonly created_at: string
  }>
}

/** The columns of an assistant with its links (a JSON array, oldest first). */
export const withLinks = (sql: SqlClient.SqlClient) => sql`a.*, coalesce((
  SELECT json_agg(json_build_object('provider', l.provider, 'subject', l.subject, 'email', l.email,
    'created_at', l.created_at) ORDER BY l.created_at)
  FROM assistant_links l WHERE l.assistant_id = a.id), '[]'::json) AS links`

export const toAssistantInfo = (row: AssistantRow): AssistantInfo => ({
  id: row.id,
  object: "assistant",
  name: row.name,
  image: row.image,
  config: row.config,
  config_version: row.config_version,
  status: row.status,
  workspace_id: row.workspace_id,
  session_id: row.session_id,
  restarts: row.restarts,
  last_error: row.last_error,
  created_at: row.created_at,
  links: (row.links ?? []).map((link) => ({ ...link, created_at: new Date(link.created_at) })),
  updated_at: row.updated_at
})

/** Who may act on an assistant: its account's members, or its own runtime (on itself alone). */
export const reach = (owner: Owner, assistantId: string) =>
  owner.principal._tag === "Assistant" && owner.principal.assistantId !== assistantId
    ? Effect.fail(new AssistantNotFound())
    : Effect.void

/** The assistant `id` of the owner's account, as the owner may reach it (a runtime: its own alone). */
export const findAssistantRow = (sql: SqlClient.SqlClient) => (owner: Owner, id: string) =>
  Effect.gen(function* () {
    yield* reach(owner, id)
    if (!isUuid(id)) return yield* new AssistantNotFound()
    const [row] = yield* sql<AssistantRow>`
      SELECT ${withLinks(sql)} FROM assistants a WHERE a.id = ${id} AND a.account_id = ${owner.accountId}`.pipe(
      Sql.orDefect
    )
    if (row === undefined) return yield* new AssistantNotFound()
    return row
  })

export const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), "utf8")

/** A config the runtime can be started from: a JSON object of bounded size, `command` and `env` of their shapes. */
export const checkConfig = (config: Record<string, unknown>): Effect.Effect<void, InvalidField> => {
  if (jsonBytes(config) > MAX_CONFIG_BYTES) return Effect.fail(new InvalidField({ field: "config" }))
  if (config.command !== undefined && !Schema.is(RuntimeCommand)(config.command))
    return Effect.fail(new InvalidField({ field: "config.command" }))
  const env = config.env
  if (
    env !== undefined &&
    (env === null ||
      typeof env !== "object" ||
      Array.isArray(env) ||
      Object.entries(env).some(
        ([key, value]) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(key) || typeof value !== "string"
      ))
  )
    return Effect.fail(new InvalidField({ field: "config.env" }))
  return Effect.void
}
