import { type ConfigIntentInfo } from "../../kernel/AssistantIntent.ts"
import { actorOf, type Owner } from "../../kernel/Owner.ts"

export interface IntentRow {
  readonly id: string
  readonly assistant_id: string
  readonly account_id: string
  readonly patch: Record<string, unknown>
  readonly reason: string | null
  readonly base_version: number
  readonly status: ConfigIntentInfo["status"]
  readonly proposed_by: string
  readonly decided_by: string | null
  readonly decision_note: string | null
  readonly applied_version: number | null
  readonly created_at: Date
  readonly expires_at: Date
  readonly decided_at: Date | null
}

/**
 * What the row says as of `now` (epoch ms): a pending intent past its
 * `expires_at` reads `expired` (decided at `expires_at`) before the
 * supervisor's sweep writes it so, and a decision cannot take it.
 */
export const statusAt = (row: IntentRow, now: number): IntentRow =>
  row.status === "pending" && row.expires_at.getTime() <= now
    ? { ...row, status: "expired", decided_at: row.expires_at }
    : row

export const intentInfoOf = (stored: IntentRow, now: number): ConfigIntentInfo => {
  const row = statusAt(stored, now)
  return {
    id: row.id,
    object: "assistant_config_intent",
    assistant_id: row.assistant_id,
    patch: row.patch,
    reason: row.reason,
    base_version: row.base_version,
    status: row.status,
    proposed_by: row.proposed_by,
    decided_by: row.decided_by,
    decision_note: row.decision_note,
    applied_version: row.applied_version,
    created_at: row.created_at,
    expires_at: row.expires_at,
    decided_at: row.decided_at
  }
}

export const intentEventData = (row: IntentRow) => ({
  id: row.id,
  assistant_id: row.assistant_id,
  status: row.status,
  patch: row.patch,
  reason: row.reason,
  base_version: row.base_version,
  proposed_by: row.proposed_by,
  decided_by: row.decided_by,
  applied_version: row.applied_version
})

/** `type:id` of whoever acts: `assistant:<id>` for a runtime. */
export const actorName = (owner: Owner) => {
  const actor = actorOf(owner.principal)
  return actor.id === null ? actor.type : `${actor.type}:${actor.id}`
}

/** RFC 7396: a JSON merge patch of `target` (null removes a key; objects merge; anything else replaces). */
export const mergePatch = (target: unknown, patch: unknown): unknown => {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch
  const base: Record<string, unknown> =
    target !== null && typeof target === "object" && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {}
  for (const [key, value] of Object.entries(patch as Record<string, unknown>)) {
    if (value === null) delete base[key]
    else base[key] = mergePatch(base[key], value)
  }
  return base
}
