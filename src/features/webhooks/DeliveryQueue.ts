import { Clock, Effect, Metric } from "effect"
import type { SqlClient } from "effect/sql"
import * as Signing from "./Signing.ts"
import type { AttemptOutcome } from "./Transport.ts"
import * as Sql from "../../platform/db/Sql.ts"

/** How long a claimed delivery is its worker's: well past an attempt's 15 s. */
export const LEASE_MS = 60_000
/** Attempts in flight to one endpoint at most (across nodes, as the claims see them). */
export const ENDPOINT_CONCURRENCY = 4
/** Due deliveries a claim looks at (the earliest): bounds its cost however long the queue is. */
const CLAIM_WINDOW = 1_000
/** Failures in a row that open an endpoint's circuit, and how long it stays open. */
export const CIRCUIT_THRESHOLD = 5
export const CIRCUIT_OPEN_MS = 60_000

export const attemptsTotal = Metric.counter("rbs_webhook_attempts_total", {
  description: "Webhook delivery attempts, by outcome (succeeded, failed, gone) and event type"
})

export interface Claimed {
  readonly id: string
  readonly webhook_id: string
  readonly event_id: string
  readonly event_type: string
  readonly series: number
  readonly attempts: number
  // What the attempt sends, read with the claim: the endpoint and its secrets, the event.
  readonly url: string
  readonly secret_ciphertext: string
  readonly previous_secret_ciphertext: string | null
  readonly previous_secret_until: Date | null
  readonly event_created_at: Date
  readonly account_id: string
  readonly data: unknown
}

/**
 * The deliveries table as a work queue, for one worker (`<node>/<process>`):
 * claims with `FOR UPDATE SKIP LOCKED` and a lease, the attempt rows, and
 * outcomes written only while the lease is the worker's own. Times from `Clock`.
 */
export const make = (sql: SqlClient.SqlClient, nodeId: string, worker: string) => {
  const now = Clock.currentTimeMillis

  /** This node's previous process left these in flight: claimable now, not when their lease ends. */
  const reclaimOwn = Effect.gen(function* () {
    yield* sql`
      UPDATE webhook_deliveries SET locked_until = ${new Date(yield* now)}
      WHERE state = 'delivering' AND locked_by LIKE ${`${nodeId}/%`} AND locked_by <> ${worker}`
  }).pipe(Sql.orDefect)

  const claim = (limit: number) =>
    sql.withTransaction(
      Effect.gen(function* () {
        const at = new Date(yield* now)
        const due = sql`
          ((d.state = 'pending' AND d.next_attempt_at <= ${at})
            OR (d.state = 'delivering' AND d.locked_until <= ${at}))`
        // The earliest due deliveries (a bounded window, however long the queue), ranked per
        // endpoint after what is in flight to it; MATERIALIZED, so each is computed once.
        const claimed = yield* sql<{ readonly id: string }>`
          WITH inflight AS MATERIALIZED (
            SELECT webhook_id, count(*) AS n FROM webhook_deliveries
            WHERE state = 'delivering' AND locked_until > ${at} GROUP BY webhook_id
          ), earliest AS MATERIALIZED (
            SELECT d.id, d.webhook_id, d.next_attempt_at FROM webhook_deliveries d
            JOIN webhooks w ON w.id = d.webhook_id
            WHERE ${due} AND w.disabled_at IS NULL
              AND (w.circuit_open_until IS NULL OR w.circuit_open_until <= ${at})
            ORDER BY d.next_attempt_at LIMIT ${CLAIM_WINDOW}
          ), ranked AS MATERIALIZED (
            SELECT e.id, e.next_attempt_at,
              row_number() OVER (PARTITION BY e.webhook_id ORDER BY e.next_attempt_at, e.id)
                + coalesce(i.n, 0) AS slot
            FROM earliest e LEFT JOIN inflight i ON i.webhook_id = e.webhook_id
          ), picked AS (
            SELECT d.id FROM ranked r JOIN webhook_deliveries d ON d.id = r.id
            WHERE ${due} AND r.slot <= ${ENDPOINT_CONCURRENCY}
            ORDER BY r.next_attempt_at LIMIT ${limit}
            FOR UPDATE OF d SKIP LOCKED
          )
          UPDATE webhook_deliveries d SET state = 'delivering', attempts = d.attempts + 1,
            locked_until = ${new Date(at.getTime() + LEASE_MS)}, locked_by = ${worker}, updated_at = ${at}
          FROM picked WHERE d.id = picked.id
          RETURNING d.id`
        if (claimed.length === 0) return [] as ReadonlyArray<Claimed>
        const ids = claimed.map((c) => c.id)
        // An attempt whose worker's lease ran out never reported: it is over, unanswered.
        yield* sql`
          UPDATE webhook_attempts SET finished_at = ${at},
            error = 'abandoned: the node sending it stopped before an answer'
          WHERE delivery_id IN ${sql.in(ids)} AND finished_at IS NULL`
        yield* sql`
          INSERT INTO webhook_attempts (delivery_id, series, number, node_id, started_at)
          SELECT d.id, d.series, d.attempts, ${nodeId}, ${at}
          FROM webhook_deliveries d WHERE d.id IN ${sql.in(ids)}`
        return yield* sql<Claimed>`
          SELECT d.id, d.webhook_id, d.event_id, d.event_type, d.series, d.attempts, w.url,
            w.secret_ciphertext, w.previous_secret_ciphertext, w.previous_secret_until,
            e.created_at AS event_created_at, e.account_id, e.data
          FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id JOIN webhook_events e ON e.id = d.event_id
          WHERE d.id IN ${sql.in(ids)}`
      })
    )

  /** Sends one claimed attempt; never fails. */

  /** Writes an attempt's outcome and what follows from it, if the lease is still ours. */
  const record = (claimed: Claimed, outcome: AttemptOutcome | undefined, startedAt: number) =>
    sql.withTransaction(
      Effect.gen(function* () {
        const at = yield* now
        const done = new Date(at)
        const result =
          outcome === undefined
            ? "failed"
            : outcome.statusCode !== null && outcome.statusCode >= 200 && outcome.statusCode < 300
              ? "succeeded"
              : outcome.statusCode === 410
                ? "gone"
                : "failed"
        yield* sql`
          UPDATE webhook_attempts SET finished_at = ${done}, duration_ms = ${Math.max(0, at - startedAt)},
            status_code = ${outcome?.statusCode ?? null},
            error = ${outcome === undefined ? "the webhook or its event no longer exists" : outcome.error},
            response_excerpt = ${outcome?.excerpt ?? null}
          WHERE delivery_id = ${claimed.id} AND series = ${claimed.series} AND number = ${claimed.attempts}`
        const ours = sql`id = ${claimed.id} AND state = 'delivering' AND locked_by = ${worker}
          AND series = ${claimed.series} AND attempts = ${claimed.attempts}`
        const status = outcome?.statusCode ?? null
        if (result === "succeeded") {
          yield* sql`
            UPDATE webhook_deliveries SET state = 'succeeded', next_attempt_at = NULL, locked_until = NULL,
              locked_by = NULL, last_status = ${status}, updated_at = ${done} WHERE ${ours}`
          yield* sql`
            UPDATE webhooks SET consecutive_failures = 0, circuit_open_until = NULL
            WHERE id = ${claimed.webhook_id} AND (consecutive_failures > 0 OR circuit_open_until IS NOT NULL)`
        } else if (result === "gone") {
          // 410 Gone: the endpoint asks for no more. Disable it; what waited for it fails.
          yield* sql`
            UPDATE webhooks SET disabled_at = ${done}, disabled_reason = 'the endpoint answered 410 Gone',
              updated_at = ${done} WHERE id = ${claimed.webhook_id}`
          yield* sql`
            UPDATE webhook_deliveries SET state = 'failed', next_attempt_at = NULL, locked_until = NULL,
              locked_by = NULL, last_status = ${status}, updated_at = ${done} WHERE ${ours}`
          yield* sql`
            UPDATE webhook_deliveries SET state = 'failed', next_attempt_at = NULL, updated_at = ${done}
            WHERE webhook_id = ${claimed.webhook_id} AND state = 'pending'`
        } else {
          const delay = Signing.retryDelay(claimed.attempts + 1)
          yield* sql`
            UPDATE webhook_deliveries SET state = ${delay === undefined ? "failed" : "pending"},
              next_attempt_at = ${delay === undefined ? null : new Date(at + delay)},
              locked_until = NULL, locked_by = NULL, last_status = ${status}, updated_at = ${done}
            WHERE ${ours}`
          yield* sql`
            UPDATE webhooks SET consecutive_failures = consecutive_failures + 1,
              circuit_open_until = CASE WHEN consecutive_failures + 1 >= ${CIRCUIT_THRESHOLD}
                THEN ${new Date(at + CIRCUIT_OPEN_MS)} ELSE circuit_open_until END
            WHERE id = ${claimed.webhook_id}`
        }
        yield* Metric.update(
          Metric.withAttributes(attemptsTotal, { outcome: result, event_type: claimed.event_type }),
          1
        )
      })
    )

  /** The service stops mid-attempt: the attempt is over unanswered, the delivery due again at once. */
  const release = (claimed: Claimed) =>
    Effect.gen(function* () {
      const at = new Date(yield* now)
      yield* sql`
        UPDATE webhook_attempts SET finished_at = ${at}, error = 'interrupted: the service stopped'
        WHERE delivery_id = ${claimed.id} AND series = ${claimed.series} AND number = ${claimed.attempts}
          AND finished_at IS NULL`
      yield* sql`
        UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = ${at}, locked_until = NULL,
          locked_by = NULL, updated_at = ${at}
        WHERE id = ${claimed.id} AND state = 'delivering' AND locked_by = ${worker}`
    }).pipe(Effect.ignore)

  /**
   * Whether a delivery can fall due without a new commit (which would NOTIFY):
   * a retry waiting for its time, or an attempt in flight, here or on a node
   * that may stop before it reports. Deliveries to a disabled endpoint never do.
   */
  const waiting = Effect.map(
    sql<{ readonly waiting: boolean }>`
      SELECT EXISTS (
        SELECT 1 FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
        WHERE d.state IN ('pending', 'delivering') AND w.disabled_at IS NULL
      ) AS waiting`,
    (rows) => rows[0]?.waiting === true
  ).pipe(Sql.orDefect)

  return { reclaimOwn, claim, record, release, waiting }
}
