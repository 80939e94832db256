import { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Effect, FiberSet, Layer, Metric, Option, Queue, Redacted, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import * as Https from "node:https"
import { Secrets } from "../auth/Secrets.ts"
import { ServiceConfig } from "../Config.ts"
import { Egress } from "../egress/Egress.ts"
import { WAKE_CHANNEL } from "./Outbox.ts"
import * as Signing from "./Signing.ts"
import { describeProblem, resolveTarget, type Target } from "./Targets.ts"
import { ATTEMPT_TIMEOUT_MS, type AttemptOutcome, post } from "./Transport.ts"
import { payloadOf } from "./Webhooks.ts"

/** How long a claimed delivery is this worker's: well past an attempt's 15 s. */
export const LEASE_MS = 60_000
/** Attempts in flight on one node at most. */
const NODE_CONCURRENCY = 32
/** Attempts in flight to one endpoint at most (across nodes, as the claims see them). */
export const ENDPOINT_CONCURRENCY = 4
/** Due deliveries a claim looks at (the earliest): bounds its cost however long the queue is. */
const CLAIM_WINDOW = 1_000
/** Failures in a row that open an endpoint's circuit, and how long it stays open. */
export const CIRCUIT_THRESHOLD = 5
export const CIRCUIT_OPEN_MS = 60_000
/** A deliverer with nothing to do looks again this often, besides every commit's wake-up. */
const POLL_MS = 1_000

/**
 * Waits on the wall clock, not `Clock`: the poll is an operational beat, and
 * what is due is decided by comparing `Clock` times in the claim. Under a
 * TestClock a moved clock is then seen whole at the next poll or wake-up,
 * never by a poll resumed halfway through the move.
 */
const pollPause = (ms: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

export const attemptsTotal = Metric.counter("rbs_webhook_attempts_total", {
  description: "Webhook delivery attempts, by outcome (succeeded, failed, gone) and event type"
})
export const attemptSeconds = Metric.histogram("rbs_webhook_attempt_seconds", {
  description: "Time from sending a webhook to the endpoint's answer",
  boundaries: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15]
})
export const deliveriesByState = Metric.gauge("rbs_webhook_deliveries", {
  description: "Webhook deliveries in the database, by state and event type (pending ones are the queue)"
})

interface Claimed {
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
 * The delivery engine, on every node: a supervised fiber claims due
 * deliveries (`FOR UPDATE SKIP LOCKED`, a lease of `LEASE_MS`, at most
 * `ENDPOINT_CONCURRENCY` in flight per endpoint, none to an endpoint whose
 * circuit is open), records each attempt before sending it, sends it signed
 * to the address its URL resolved to (checked by the SSRF guard), and records
 * the outcome guarded by its lease. Times come from `Clock`. An attempt
 * belongs to one worker: a lease that runs out (the node died) counts that
 * attempt as abandoned and the next claim is a new attempt, so none is sent
 * twice by two nodes. Commits that create work wake every node (`NOTIFY`).
 */
export const layer = Layer.effectDiscard(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* ServiceConfig
    const egress = yield* Egress
    const key = Redacted.value((yield* Secrets).secretsAtRestKey)
    const guard = { policy: egress.webhookPolicy, allowed: egress.webhookAllowed }
    const worker = `${config.nodeId}/${Crypto.randomUUID().slice(0, 8)}`
    const now = Clock.currentTimeMillis
    const wake = yield* Queue.sliding<void>(1)
    const attempts = yield* FiberSet.make()
    // Kept-alive connections per endpoint and checked address: no TCP (and TLS) handshake per attempt.
    const agents = new Map<string, Http.Agent>()
    const agentFor = (target: Target) => {
      const id = `${target.url.protocol}//${target.url.host}@${target.address}`
      let agent = agents.get(id)
      if (agent === undefined) {
        const options = { keepAlive: true, maxSockets: ENDPOINT_CONCURRENCY, timeout: ATTEMPT_TIMEOUT_MS }
        agent = target.url.protocol === "https:" ? new Https.Agent(options) : new Http.Agent(options)
        agents.set(id, agent)
      }
      return agent
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const agent of agents.values()) agent.destroy()
      })
    )
    let inFlight = 0

    // This node's previous process left these in flight: claimable now, not when their lease ends.
    yield* sql`
      UPDATE webhook_deliveries SET locked_until = ${new Date(yield* now)}
      WHERE state = 'delivering' AND locked_by LIKE ${`${config.nodeId}/%`} AND locked_by <> ${worker}`.pipe(
      Effect.orDie
    )

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
            SELECT d.id, d.series, d.attempts, ${config.nodeId}, ${at}
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
    const send = (claimed: Claimed) =>
      Effect.gen(function* () {
        const hook = claimed
        const event = {
          id: claimed.event_id,
          type: claimed.event_type,
          created_at: claimed.event_created_at,
          account_id: claimed.account_id,
          data: claimed.data
        }
        const target = yield* resolveTarget(hook.url, guard).pipe(Effect.result)
        if (target._tag === "Failure")
          return {
            statusCode: null,
            error: describeProblem(target.failure),
            excerpt: null
          } satisfies AttemptOutcome
        const at = yield* now
        const secrets = [Signing.decrypt(key, hook.secret_ciphertext)]
        if (
          hook.previous_secret_ciphertext !== null &&
          hook.previous_secret_until !== null &&
          hook.previous_secret_until.getTime() > at
        )
          secrets.push(Signing.decrypt(key, hook.previous_secret_ciphertext))
        const body = JSON.stringify(payloadOf(event))
        const headers = Signing.headers(secrets, event.id, Math.floor(at / 1000), body)
        const started = performance.now()
        const outcome = yield* Effect.promise(() =>
          post(target.success, headers, body, agentFor(target.success))
        )
        yield* Metric.update(attemptSeconds, (performance.now() - started) / 1000)
        return outcome
      }).pipe(Effect.orDie)

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

    const attempt = (claimed: Claimed) =>
      Effect.gen(function* () {
        const startedAt = yield* now
        const outcome = yield* send(claimed)
        yield* record(claimed, outcome, startedAt).pipe(Effect.orDie)
      }).pipe(
        Effect.onInterrupt(() => release(claimed)),
        Effect.catchCause((cause) =>
          Cause.hasInterruptsOnly(cause)
            ? Effect.failCause(cause)
            : Effect.logError("webhook.attempt_failed", { deliveryId: claimed.id, cause })
        ),
        Effect.ensuring(
          Effect.suspend(() => {
            inFlight--
            return Queue.offer(wake, undefined)
          })
        )
      )

    const loop = Effect.gen(function* () {
      const room = NODE_CONCURRENCY - inFlight
      const claimed = room > 0 ? yield* claim(room) : []
      for (const each of claimed) {
        inFlight++
        yield* FiberSet.run(attempts, attempt(each))
      }
      // Nothing claimable, or no room: wait for a commit, a finished attempt, or the poll.
      if (claimed.length === 0 || inFlight >= NODE_CONCURRENCY)
        yield* Effect.raceFirst(Queue.take(wake), pollPause(POLL_MS))
    }).pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logError("webhook.claim_failed", { cause }).pipe(Effect.andThen(pollPause(POLL_MS)))
      ),
      Effect.forever
    )

    // Commits with new work NOTIFY: every node's deliverer looks at once instead of at its next poll.
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (Option.isSome(pg)) {
      const listen = Effect.gen(function* () {
        const notifications = yield* pg.value.listen(WAKE_CHANNEL)
        yield* Queue.take(notifications).pipe(Effect.andThen(Queue.offer(wake, undefined)), Effect.forever)
      }).pipe(Effect.scoped, Effect.retry(Schedule.spaced("1 second")), Effect.ignore)
      yield* Effect.forkScoped(listen)
    }

    // By state and event type; a pair seen once is reported (as 0) until the process ends.
    const seen = new Set<string>()
    const gauge = Effect.gen(function* () {
      const rows = yield* sql<{ state: string; event_type: string; count: number }>`
        SELECT state, event_type, count(*)::int AS count FROM webhook_deliveries GROUP BY state, event_type`
      for (const row of rows) seen.add(`${row.state} ${row.event_type}`)
      for (const pair of seen) {
        const [state, event_type] = pair.split(" ") as [string, string]
        const row = rows.find((r) => r.state === state && r.event_type === event_type)
        yield* Metric.update(Metric.withAttributes(deliveriesByState, { state, event_type }), row?.count ?? 0)
      }
    }).pipe(Effect.ignore, Effect.andThen(Effect.sleep("5 seconds")), Effect.forever)

    yield* Effect.forkScoped(loop)
    yield* Effect.forkScoped(gauge)
  })
)
