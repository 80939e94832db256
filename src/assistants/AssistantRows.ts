import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { type AssistantInfo, AssistantNotFound } from "../domain/Assistant.ts"
import { isUuid } from "../domain/Ids.ts"
import type { Owner } from "../domain/Owner.ts"

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
}

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
      SELECT * FROM assistants WHERE id = ${id} AND account_id = ${owner.accountId}`.pipe(Effect.orDie)
    if (row === undefined) return yield* new AssistantNotFound()
    return row
  })
