import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { SessionHooks } from "../sessions/SessionLifecycle.ts"

/** The channel of commits that give the supervisor work: every node's sweep looks at once. */
export const WAKE_CHANNEL = "rbs_assistants"

/** Wakes every node's sweep when the caller's transaction commits (Postgres sends a `NOTIFY` only then). */
export const wakeSupervisor = (sql: SqlClient.SqlClient) =>
  sql`SELECT pg_notify(${WAKE_CHANNEL}, '')`.pipe(Effect.asVoid)

/**
 * The end of a running assistant's session (its TTL, a crash, a `DELETE`, its
 * node lost) wakes the sweep, which starts its runtime again. Only a session
 * on a workspace can be an assistant's (whatever its kind): for any other the
 * lookup has no key; this one's is one probe of a partial index, in the
 * statement that ends it. A CTE that only reads runs when the statement reads
 * it: the part's output (the assistants woken) does.
 */
export const layerSessionHooks = SessionHooks.add(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return {
      endedParts: [
        (ended: string, prefix: string) => {
          const wake = sql(`${prefix}_wake`)
          return Effect.succeed({
            ctes: sql`
              ${wake} AS (
                SELECT pg_notify(${WAKE_CHANNEL}::text, '') FROM assistants
                WHERE session_id = (SELECT id FROM ${sql(ended)} WHERE workspace_id IS NOT NULL)
                  AND status = 'running'
              )`,
            output: sql`SELECT count(*) FROM ${wake}`
          })
        }
      ]
    }
  })
)
