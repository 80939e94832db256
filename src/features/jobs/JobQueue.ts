import { Clock, Effect, Metric, type Schema } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import type { SqlClient } from "effect/sql"
import type { WebhookOutbox } from "../webhooks/Outbox.ts"
import type { JobFailed } from "./JobKind.ts"
import { clusterTimings } from "../../platform/config/Config.ts"
import { type JobRow, jobEventData } from "./JobRows.ts"

/** How long a claimed job is its worker's without a renewal (`JOB_LEASE_SECONDS`); renewed 4 times a lease while it runs. */
export const LEASE_MS = 60_000
/** Attempts a job may take unless a retry raises it. */
export const ATTEMPT_LIMIT = 3
/** The wait before the next attempt of a job whose attempt `n` failed (+-10%): 10 s, 1 min, 5 min. */
export const RETRY_DELAYS_MS = [10_000, 60_000, 300_000] as const
/** A node without room for the job's session tries again after this, the attempt not counted. */
export const DEFER_MS = 5_000
/** The advisory lock that makes claims take turns (its key keeps it apart from other advisory locks). */
const CLAIM_LOCK = 0x72627302

export const retryDelay = (attempt: number, random: () => number = Math.random) => {
  const base = RETRY_DELAYS_MS[Math.min(attempt, RETRY_DELAYS_MS.length) - 1]!
  return Math.round(base * (0.9 + 0.2 * random()))
}

export const attemptsTotal = Metric.counter("rbs_job_attempts_total", {
  description: "Job attempts, by kind and outcome (succeeded, failed, deferred, interrupted)"
})

/** A claimed attempt: the job as the claim read it. */
export interface Claimed {
  readonly id: string
  readonly account_id: string
  readonly owner: unknown
  readonly kind: string
  /** As it was sent: its kind decodes it where it reads it. */
  readonly input: Schema.Json
  /** This attempt's number. */
  readonly attempts: number
  readonly attempt_limit: number
}

/** The blob a succeeded attempt left, already in the store. */
export interface StoredResult {
  readonly key: string
  readonly contentType: string
  readonly bytes: number
}

/**
 * The jobs table as a work queue, for one worker (`<node>/<process>`):
 * claims with `FOR UPDATE SKIP LOCKED` and a lease (at most `perAccount`
 * running per account, across nodes), the attempt rows, and outcomes
 * written only while the job is still the worker's (not cancelled, not
 * taken over after its lease ran out). Times from `Clock`.
 */
export const make = (options: {
  readonly sql: SqlClient.SqlClient
  readonly outbox: WebhookOutbox["Service"]
  readonly nodeId: string
  readonly worker: string
  readonly perAccount: number
  readonly leaseMs?: number | undefined
  /** The nodes that beat since `cutoff` (a job pinned to another is anyone's). */
  readonly liveNodes: (cutoff: Date) => Effect.Effect<ReadonlyArray<string>>
  /** A node whose last beat is older is gone (`clusterTimings`; 6 s by default). */
  readonly placeableWithinMs?: number | undefined
}) => {
  const { sql, outbox, nodeId, worker } = options
  const now = Clock.currentTimeMillis
  const leaseMs = options.leaseMs ?? LEASE_MS
  const placeableWithinMs = options.placeableWithinMs ?? clusterTimings().placeableWithinMs

  /** This node's previous process left these running: claimable now, not when their lease ends. */
  const reclaimOwn = Effect.gen(function* () {
    yield* sql`
      UPDATE jobs SET locked_until = ${new Date(yield* now)}
      WHERE state = 'running' AND locked_by LIKE ${`${nodeId}/%`} AND locked_by <> ${worker}`
  }).pipe(Sql.orDefect)

  const finishedEvent = (row: JobRow) =>
    outbox.emit(row.account_id, row.state === "succeeded" ? "job.succeeded" : "job.failed", jobEventData(row))

  /**
   * Jobs whose worker stopped answering (lease run out) with no attempts
   * left: failed as abandoned, and said so.
   */
  const failAbandoned = (at: Date) =>
    sql.withTransaction(
      Effect.gen(function* () {
        const rows = yield* sql<JobRow>`
          UPDATE jobs SET state = 'failed', error_code = 'abandoned',
            error_message = 'The node running it stopped before it finished, and it has no attempts left.',
            locked_until = NULL, locked_by = NULL, next_attempt_at = NULL, finished_at = ${at}, updated_at = ${at}
          WHERE state = 'running' AND locked_until <= ${at} AND attempts >= attempt_limit
          RETURNING *`
        if (rows.length === 0) return
        yield* abandonAttempts(
          rows.map((row) => row.id),
          at
        )
        for (const row of rows) yield* finishedEvent(row)
      })
    )

  const abandonAttempts = (ids: ReadonlyArray<string>, at: Date) =>
    sql`
      UPDATE job_attempts SET finished_at = ${at}, outcome = 'abandoned',
        error = 'abandoned: the node running it stopped before it finished'
      WHERE job_id IN ${sql.in(ids)} AND finished_at IS NULL`

  /** Up to `limit` due jobs of `kinds` this node may run, each a new attempt recorded before it runs. */
  const claim = (limit: number, kinds: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      if (kinds.length === 0 || limit <= 0) return [] as ReadonlyArray<Claimed>
      const at = new Date(yield* now)
      yield* failAbandoned(at)
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          // One claim at a time across the nodes: each then counts what the others claimed (committed),
          // so an account never runs more than `perAccount` at once however many nodes claim together.
          yield* sql`SELECT pg_advisory_xact_lock(${CLAIM_LOCK})`
          const due = sql`
            ((j.state = 'queued' AND j.next_attempt_at <= ${at})
              OR (j.state = 'running' AND j.locked_until <= ${at}))`
          // The due jobs this node may run (its own, anyone's, or pinned to a node that is gone), ranked per
          // account after what runs for it: an account with a long queue takes no more than its share.
          const live = yield* options.liveNodes(new Date(at.getTime() - placeableWithinMs))
          const claimed = yield* sql<{ readonly id: string }>`
            WITH running AS MATERIALIZED (
              SELECT account_id, count(*) AS n FROM jobs
              WHERE state = 'running' AND locked_until > ${at} GROUP BY account_id
            ), ranked AS MATERIALIZED (
              SELECT j.id, j.next_attempt_at,
                row_number() OVER (PARTITION BY j.account_id ORDER BY j.next_attempt_at, j.id)
                  + coalesce(r.n, 0) AS slot
              FROM jobs j LEFT JOIN running r ON r.account_id = j.account_id
              WHERE ${due} AND j.kind IN ${sql.in(kinds)}
                AND (j.node_id IS NULL OR j.node_id = ${nodeId} OR j.node_id <> ALL (${live}::text[]))
            ), picked AS (
              SELECT j.id FROM ranked r JOIN jobs j ON j.id = r.id
              WHERE ${due} AND r.slot <= ${options.perAccount}
              ORDER BY r.next_attempt_at NULLS FIRST LIMIT ${limit}
              FOR UPDATE OF j SKIP LOCKED
            )
            UPDATE jobs j SET state = 'running', attempts = j.attempts + 1, next_attempt_at = NULL,
              locked_until = ${new Date(at.getTime() + leaseMs)}, locked_by = ${worker}, session_id = NULL,
              started_at = coalesce(j.started_at, ${at}), updated_at = ${at}
            FROM picked WHERE j.id = picked.id
            RETURNING j.id`
          if (claimed.length === 0) return [] as ReadonlyArray<Claimed>
          const ids = claimed.map((c) => c.id)
          // An attempt whose worker's lease ran out never reported: it is over, abandoned.
          yield* abandonAttempts(ids, at)
          yield* sql`
            INSERT INTO job_attempts (job_id, number, node_id, started_at)
            SELECT id, attempts, ${nodeId}, ${at} FROM jobs WHERE id IN ${sql.in(ids)}`
          return yield* sql<Claimed>`
            SELECT id, account_id, owner, kind, input, attempts, attempt_limit FROM jobs WHERE id IN ${sql.in(ids)}`
        })
      )
    }).pipe(Sql.orDefect)

  const ours = (claimed: Claimed) =>
    sql`id = ${claimed.id} AND state = 'running' AND locked_by = ${worker} AND attempts = ${claimed.attempts}`

  const finishAttempt = (claimed: Claimed, at: Date, outcome: string, error: string | null) =>
    sql`
      UPDATE job_attempts SET finished_at = ${at}, outcome = ${outcome}, error = ${error}
      WHERE job_id = ${claimed.id} AND number = ${claimed.attempts} AND finished_at IS NULL`

  const count = (claimed: Claimed, outcome: string) =>
    Metric.update(Metric.withAttributes(attemptsTotal, { kind: claimed.kind, outcome }), 1)

  /** Extends the leases of these running jobs; answers those still the worker's (not cancelled). */
  const renew = (ids: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      if (ids.length === 0) return new Set<string>()
      const at = yield* now
      const rows = yield* sql<{ readonly id: string }>`
        UPDATE jobs SET locked_until = ${new Date(at + leaseMs)}
        WHERE id IN ${sql.in(ids)} AND state = 'running' AND locked_by = ${worker}
        RETURNING id`
      return new Set(rows.map((row) => row.id))
    }).pipe(Sql.orDefect)

  /** Records the session an attempt runs in, while the attempt is still the worker's. */
  const usesSession = (claimed: Claimed, sessionId: string) =>
    sql`UPDATE jobs SET session_id = ${sessionId} WHERE ${ours(claimed)}`.pipe(Effect.asVoid, Sql.orDefect)

  /** A succeeded attempt; false when the job was no longer the worker's (its result is not kept). */
  const succeed = (claimed: Claimed, result: unknown, stored: StoredResult | undefined) =>
    sql
      .withTransaction(
        Effect.gen(function* () {
          const at = new Date(yield* now)
          const rows = yield* sql<JobRow>`
            UPDATE jobs SET state = 'succeeded', result = ${JSON.stringify(result ?? null)}::jsonb,
              result_key = ${stored?.key ?? null}, result_content_type = ${stored?.contentType ?? null},
              result_bytes = ${stored?.bytes ?? null}, result_node_id = ${stored === undefined ? null : nodeId},
              error_code = NULL, error_message = NULL, locked_until = NULL, locked_by = NULL,
              finished_at = ${at}, updated_at = ${at}
            WHERE ${ours(claimed)} RETURNING *`
          const row = rows[0]
          if (row === undefined) return false
          yield* finishAttempt(claimed, at, "succeeded", null)
          yield* finishedEvent(row)
          yield* count(claimed, "succeeded")
          return true
        })
      )
      .pipe(Sql.orDefect)

  /**
   * A failed attempt: another one after the retry schedule's wait while it
   * may fare better and attempts are left, soon and uncounted when the node
   * had no room, else the job fails.
   */
  const fail = (claimed: Claimed, failure: JobFailed) =>
    sql
      .withTransaction(
        Effect.gen(function* () {
          const at = yield* now
          const done = new Date(at)
          const error = `${failure.code}: ${failure.detail}`
          if (failure.deferred === true) {
            // A short wait asked for grows with each deferral (30 s at most): a long wait costs few attempts.
            const wait =
              failure.deferMs === undefined ? DEFER_MS : Math.min(30_000, failure.deferMs * claimed.attempts)
            const rows = yield* sql`
              UPDATE jobs SET state = 'queued', next_attempt_at = ${new Date(at + wait)},
                attempt_limit = attempt_limit + 1, locked_until = NULL, locked_by = NULL, session_id = NULL,
                node_id = ${failure.pinTo === undefined ? sql`node_id` : failure.pinTo}, updated_at = ${done}
              WHERE ${ours(claimed)} RETURNING id`
            if (rows.length > 0) yield* finishAttempt(claimed, done, "deferred", error)
            return yield* count(claimed, "deferred")
          }
          const again = failure.retryable && claimed.attempts < claimed.attempt_limit
          const rows = yield* sql<JobRow>`
            UPDATE jobs SET state = ${again ? "queued" : "failed"},
              next_attempt_at = ${again ? new Date(at + retryDelay(claimed.attempts)) : null},
              error_code = ${failure.code}, error_message = ${failure.detail},
              finished_at = ${again ? null : done}, locked_until = NULL, locked_by = NULL, updated_at = ${done}
            WHERE ${ours(claimed)} RETURNING *`
          const row = rows[0]
          if (row === undefined) return
          yield* finishAttempt(claimed, done, "failed", error)
          if (!again) yield* finishedEvent(row)
          yield* count(claimed, "failed")
        })
      )
      .pipe(Sql.orDefect)

  /** The service stops mid-attempt: the attempt is over, the job due again at once (on any node). */
  const release = (claimed: Claimed) =>
    sql
      .withTransaction(
        Effect.gen(function* () {
          const at = new Date(yield* now)
          const rows = yield* sql`
            UPDATE jobs SET state = 'queued', next_attempt_at = ${at}, attempt_limit = attempt_limit + 1,
              locked_until = NULL, locked_by = NULL, session_id = NULL, updated_at = ${at}
            WHERE ${ours(claimed)} RETURNING id`
          if (rows.length > 0) {
            yield* finishAttempt(claimed, at, "interrupted", "interrupted: the service running it stopped")
            yield* count(claimed, "interrupted")
          }
        })
      )
      .pipe(Effect.ignore)

  /** Whether a job can fall due without a new commit: a retry waiting for its time, or one running. */
  const waiting = Effect.map(
    sql<{ readonly waiting: boolean }>`
      SELECT EXISTS (SELECT 1 FROM jobs WHERE state IN ('queued', 'running')) AS waiting`,
    (rows) => rows[0]?.waiting === true
  ).pipe(Sql.orDefect)

  return { reclaimOwn, claim, renew, usesSession, succeed, fail, release, waiting }
}
