import { Effect } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import { SessionHooks } from "../sessions/SessionLifecycle.ts"
import type { SessionRow } from "../sessions/SessionsRepo.ts"

/** The channel of commits that give the supervisor work: every node's sweep looks at once. */
export const WAKE_CHANNEL = "rbs_assistants"

/** Wakes every node's sweep when the caller's transaction commits (Postgres sends a `NOTIFY` only then). */
export const wakeSupervisor = (sql: SqlClient.SqlClient) =>
  sql`SELECT pg_notify(${WAKE_CHANNEL}, '')`.pipe(Effect.asVoid)

/**
 * The end of a running assistant's session (its TTL, a crash, a `DELETE`, its
 * node lost) wakes the sweep, which starts its runtime again. Only a session
 * on a workspace can be an assistant's (whatever its kind): any other ends
 * without a statement more; this one's costs one lookup on a partial index, in
 * the transaction that ends it.
 */
export const layerSessionHooks = SessionHooks.add(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return {
      ended: [
        (row: SessionRow) =>
          row.workspace_id === null
            ? Effect.void
            : sql`
                SELECT pg_notify(${WAKE_CHANNEL}, '') FROM assistants
                WHERE session_id = ${row.id} AND status = 'running'`.pipe(Effect.asVoid, Sql.orDefect)
      ]
    }
  })
)
