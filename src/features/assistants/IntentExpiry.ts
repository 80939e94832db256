import { Clock, Effect } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import type { SqlClient } from "effect/sql"
import type { Audit } from "../audit/Audit.ts"
import { systemOwner } from "../../kernel/Owner.ts"
import type { WebhookOutbox } from "../webhooks/Outbox.ts"
import { type IntentRow, intentEventData } from "./IntentRows.ts"

/**
 * The expiry of the config intents nobody decided. Reads show a pending
 * intent past its `expires_at` as expired at once (`statusAt`), and a
 * decision refuses it; the supervisor's sweep alone writes the transition:
 * the row, its audit event (by the system) and `config_intent.expired`.
 */
export const make = (sql: SqlClient.SqlClient, audit: Audit["Service"], outbox: WebhookOutbox["Service"]) => {
  /** Writes the pending intents past their time as expired; how many. */
  const expireDue: Effect.Effect<number> = Effect.gen(function* () {
    const at = new Date(yield* Clock.currentTimeMillis)
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        const rows = yield* sql<IntentRow>`
          UPDATE assistant_config_intents SET status = 'expired', decided_at = expires_at
          WHERE id IN (SELECT id FROM assistant_config_intents WHERE status = 'pending' AND expires_at <= ${at}
            FOR UPDATE SKIP LOCKED)
          RETURNING *`
        for (const row of rows) {
          yield* audit.record(systemOwner(row.account_id), {
            action: "config_intent.expired",
            targetType: "assistant",
            targetId: row.assistant_id,
            details: { intent_id: row.id }
          })
          yield* outbox.emit(row.account_id, "config_intent.expired", intentEventData(row))
        }
        return rows.length
      })
    )
  }).pipe(Sql.orDefect)

  /** When the next pending intent expires, if one is pending. */
  const nextExpiry: Effect.Effect<Date | undefined> = sql<{ readonly next: Date | null }>`
    SELECT min(expires_at) AS next FROM assistant_config_intents WHERE status = 'pending'`.pipe(
    Sql.orDefect,
    Effect.map((rows) => rows[0]?.next ?? undefined)
  )

  return { expireDue, nextExpiry }
}
