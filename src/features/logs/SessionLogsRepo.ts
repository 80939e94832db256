import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as Sql from "../../platform/db/Sql.ts"

/** One event as it is written: its place in the session's log, and its size as counted in storage. */
export interface StoredEvent {
  readonly seq: number
  readonly at: Date
  readonly kind: string
  readonly data: unknown
  readonly bytes: number
}

export const EventRow = Schema.Struct({
  seq: Schema.Number,
  at: Schema.Date,
  kind: Schema.String,
  data: Schema.Unknown
})
export type EventRow = typeof EventRow.Type

const SummaryRow = Schema.Struct({
  events: Schema.Number,
  complete: Schema.Boolean
})
export type SummaryRow = typeof SummaryRow.Type

export interface EventQuery {
  readonly after: number
  readonly limit: number
  readonly kinds: ReadonlyArray<string> | undefined
  readonly since: Date | undefined
  readonly until: Date | undefined
}

/** SQL for `session_logs` and `session_log_events`; failures here are defects. */
export class SessionLogsRepo extends Context.Service<
  SessionLogsRepo,
  {
    /**
     * Appends `events` to the session's log and its totals, in one statement; with `expiresAt`,
     * the log is complete (its session ended) and may be deleted from then.
     */
    readonly append: (
      sessionId: string,
      accountId: string,
      events: ReadonlyArray<StoredEvent>,
      at: Date,
      expiresAt?: Date
    ) => Effect.Effect<void>
    readonly summary: (sessionId: string) => Effect.Effect<SummaryRow | undefined>
    /** Events after `after` in order, filtered, at most `limit`. */
    readonly events: (sessionId: string, query: EventQuery) => Effect.Effect<ReadonlyArray<EventRow>>
    /** Deletes logs past their expiry, and incomplete ones (a node lost) unwritten since `staleBefore`. */
    readonly sweep: (now: Date, staleBefore: Date, limit: number) => Effect.Effect<number>
    /** What the account's session logs hold, in bytes. */
    readonly usedBytes: (accountId: string) => Effect.Effect<number>
  }
>()("rbs/logs/SessionLogsRepo") {
  static readonly layer = Layer.effect(
    SessionLogsRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const decodeEvents = Schema.decodeUnknownEffect(Schema.Array(EventRow))
      const decodeSummary = Schema.decodeUnknownEffect(Schema.Array(SummaryRow))
      return Sql.defects({
        append: (sessionId, accountId, events, at, expiresAt) =>
          sql`
            WITH summary AS (
              INSERT INTO session_logs (session_id, account_id, events, bytes, complete, written_at, expires_at)
              VALUES (${sessionId}, ${accountId}, ${events.length},
                ${events.reduce((sum, event) => sum + event.bytes, 0)}, ${expiresAt !== undefined}, ${at},
                ${expiresAt ?? null})
              ON CONFLICT (session_id) DO UPDATE SET
                events = session_logs.events + EXCLUDED.events,
                bytes = session_logs.bytes + EXCLUDED.bytes,
                complete = session_logs.complete OR EXCLUDED.complete,
                written_at = EXCLUDED.written_at,
                expires_at = coalesce(EXCLUDED.expires_at, session_logs.expires_at)
              RETURNING session_id
            )
            INSERT INTO session_log_events (session_id, seq, at, kind, data)
            SELECT (SELECT session_id FROM summary), e.seq, e.at, e.kind, e.data
            FROM unnest(${events.map((e) => e.seq)}::int[], ${events.map((e) => e.at.toISOString())}::timestamptz[],
              ${events.map((e) => e.kind)}::text[], ${events.map((e) => JSON.stringify(e.data))}::jsonb[])
              AS e (seq, at, kind, data)`.pipe(Effect.asVoid),
        summary: (sessionId) =>
          sql`SELECT events, complete FROM session_logs WHERE session_id = ${sessionId}`.pipe(
            Effect.flatMap(decodeSummary),
            Effect.map((rows) => rows[0])
          ),
        events: (sessionId, query) =>
          sql`
            SELECT seq, at, kind, data FROM session_log_events
            WHERE session_id = ${sessionId} AND seq > ${query.after}
              AND (${query.kinds ?? null}::text[] IS NULL OR kind = ANY (${query.kinds ?? null}::text[]))
              AND (${query.since ?? null}::timestamptz IS NULL OR at >= ${query.since ?? null}::timestamptz)
              AND (${query.until ?? null}::timestamptz IS NULL OR at < ${query.until ?? null}::timestamptz)
            ORDER BY seq LIMIT ${query.limit}`.pipe(Effect.flatMap(decodeEvents)),
        sweep: (now, staleBefore, limit) =>
          sql<{ readonly session_id: string }>`
            DELETE FROM session_logs WHERE session_id IN (
              SELECT session_id FROM session_logs
              WHERE expires_at < ${now} OR (NOT complete AND written_at < ${staleBefore})
              LIMIT ${limit})
            RETURNING session_id`.pipe(Effect.map((rows) => rows.length)),
        usedBytes: (accountId) =>
          sql<{ readonly bytes: string }>`
            SELECT coalesce(sum(bytes), 0)::text AS bytes FROM session_logs WHERE account_id = ${accountId}`.pipe(
            Effect.map((rows) => Number(rows[0]?.bytes ?? 0))
          )
      })
    })
  )
}
