import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import { type EndedFacts, SessionHooks } from "./SessionLifecycle.ts"
import type { SessionRow } from "./SessionsRepo.ts"

// A session's webhook events, each built in SQL in the statement of its change: `session.created`
// in the insert's (`CreateSession`), the others in each transition's.

/** The `data` of a session event: the session as its row says at the change. */
export const sessionData = (row: SessionRow) => ({
  id: row.id,
  session_type: row.session_type,
  status: row.status,
  region: row.region,
  created_at: row.created_at.toISOString(),
  ready_at: row.ready_at?.toISOString() ?? null,
  expires_at: row.expires_at.toISOString(),
  ended_at: row.ended_at?.toISOString() ?? null,
  ended_reason: row.ended_reason,
  bytes_up: Number(row.bytes_up),
  bytes_down: Number(row.bytes_down),
  metadata: row.metadata
})

/** An instant as `Date.toISOString` writes it (UTC, milliseconds), in SQL. */
const isoTime = (column: string) =>
  `to_char(source.${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

/**
 * `sessionData` in SQL, over the changed row (`source`): the event is built in the statement that
 * makes the change. Its JSON is `sessionData`'s to the millisecond (`test/features/webhooks/Webhooks.test.ts`).
 */
const SESSION_DATA_SQL = `jsonb_build_object(
  'id', source.id, 'session_type', source.session_type, 'status', source.status, 'region', source.region,
  'created_at', ${isoTime("created_at")}, 'ready_at', ${isoTime("ready_at")},
  'expires_at', ${isoTime("expires_at")}, 'ended_at', ${isoTime("ended_at")},
  'ended_reason', source.ended_reason, 'bytes_up', source.bytes_up, 'bytes_down', source.bytes_down,
  'metadata', source.metadata)`

/** `session.created` as a part of the insert's statement (`CreateSession`): the CTE `changed` is the new row. */
export const createdEventPart = (
  outbox: WebhookOutbox["Service"],
  sql: SqlClient.SqlClient,
  changed: string
) => outbox.emitPart("created_event", changed, "session.created", sql.literal(SESSION_DATA_SQL))

/** `session.ready`, `session.closed` and `session.error`, each in the statement of its transition. */
export const layerHooks = SessionHooks.add(
  Effect.gen(function* () {
    const outbox = yield* WebhookOutbox
    const sql = yield* SqlClient.SqlClient
    const data = sql.literal(SESSION_DATA_SQL)
    return {
      readyParts: [
        (changed: string, prefix: string) =>
          Effect.map(outbox.emitPart(prefix, changed, "session.ready", data), (ctes) => ({ ctes }))
      ],
      endedParts: [
        (changed: string, prefix: string, facts: EndedFacts) =>
          Effect.map(
            outbox.emitPart(
              prefix,
              changed,
              facts.status === "error" ? "session.error" : "session.closed",
              data
            ),
            (ctes) => ({ ctes })
          )
      ]
    }
  })
)
