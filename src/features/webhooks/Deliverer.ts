import { Cause, Clock, Effect, FiberSet, Layer, Metric, Queue, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import * as Https from "node:https"
import { Secrets } from "../../platform/crypto/Secrets.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import { WEBHOOK_EVENTS } from "../../kernel/Webhook.ts"
import { Egress } from "../../platform/net/Egress.ts"
import * as DeliveryQueue from "./DeliveryQueue.ts"
import { type Claimed, ENDPOINT_CONCURRENCY } from "./DeliveryQueue.ts"
import { WAKE_CHANNEL } from "./Outbox.ts"
import * as Sealed from "../../platform/crypto/Sealed.ts"
import * as Signing from "./Signing.ts"
import { describeProblem, resolveTarget, type Target } from "./Targets.ts"
import { ATTEMPT_TIMEOUT_MS, type AttemptOutcome, post } from "./Transport.ts"
import { payloadOf } from "./WebhookDeliveries.ts"
import * as Wake from "../../platform/work/Wake.ts"
import { ACCOUNT_ID, SESSION_ID } from "../../platform/observability/Tracing.ts"
import * as Sql from "../../platform/db/Sql.ts"

/** Attempts in flight on one node at most. */
const NODE_CONCURRENCY = 32
/** A deliverer with deliveries waiting for their time looks again this often, besides every commit's wake-up. */
const POLL_MS = 1_000
/**
 * With none waiting, only a commit makes work, and every commit wakes every node
 * (`NOTIFY`, and a reconnected listener looks once): this poll is a safety net.
 */
const IDLE_POLL_MS = 30_000

/** The session a delivery is about (`session.*` events carry it as their data's id). */
const sessionOf = (claimed: Claimed) => {
  const data = claimed.data as { readonly id?: unknown } | null
  return claimed.event_type.startsWith("session.") && typeof data?.id === "string"
    ? { [SESSION_ID]: data.id }
    : {}
}

export const attemptSeconds = Metric.histogram("rbs_webhook_attempt_seconds", {
  description: "Time from sending a webhook to the endpoint's answer",
  boundaries: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15]
})
export const deliveriesByState = Metric.gauge("rbs_webhook_deliveries", {
  description: "Webhook deliveries in the database, by state and event type (pending ones are the queue)"
})

/**
 * Sets `rbs_webhook_deliveries` from the table, at each scrape (`GET /metrics`)
 * rather than on a timer: an idle node reads nothing. By state and event type;
 * the queue (`pending`) of every type is always reported, and any other pair
 * seen once is reported (as 0) until the process ends.
 */
export const makeDeliveriesGauge = (sql: SqlClient.SqlClient) => {
  const seen = new Set<string>(WEBHOOK_EVENTS.map((type) => `pending ${type}`))
  return Effect.gen(function* () {
    const rows = yield* sql<{ state: string; event_type: string; count: number }>`
      SELECT state, event_type, count(*)::int AS count FROM webhook_deliveries GROUP BY state, event_type`
    for (const row of rows) seen.add(`${row.state} ${row.event_type}`)
    for (const pair of seen) {
      const [state, event_type] = pair.split(" ") as [string, string]
      const row = rows.find((r) => r.state === state && r.event_type === event_type)
      yield* Metric.update(Metric.withAttributes(deliveriesByState, { state, event_type }), row?.count ?? 0)
    }
  }).pipe(Effect.ignore)
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
    const config = yield* NodeConfig
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

    const queue = DeliveryQueue.make(sql, config.nodeId, worker)
    yield* queue.reclaimOwn

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
        const secrets = [Sealed.decrypt(key, hook.secret_ciphertext)]
        if (
          hook.previous_secret_ciphertext !== null &&
          hook.previous_secret_until !== null &&
          hook.previous_secret_until.getTime() > at
        )
          secrets.push(Sealed.decrypt(key, hook.previous_secret_ciphertext))
        const body = JSON.stringify(payloadOf(event))
        const headers = Signing.headers(secrets, event.id, Math.floor(at / 1000), body)
        const started = performance.now()
        const outcome = yield* Effect.promise(() =>
          post(target.success, headers, body, agentFor(target.success))
        )
        yield* Metric.update(attemptSeconds, (performance.now() - started) / 1000)
        return outcome
      })

    const attempt = (claimed: Claimed) =>
      Effect.gen(function* () {
        const startedAt = yield* now
        const outcome = yield* send(claimed)
        // The endpoint's answer, or why there was none (never the URL: it may hold a secret).
        yield* Effect.annotateCurrentSpan(
          outcome.statusCode === null
            ? { "rbs.webhook.error": outcome.error ?? "no answer" }
            : { "http.response.status_code": outcome.statusCode }
        )
        yield* queue.record(claimed, outcome, startedAt).pipe(Sql.orDefect)
      }).pipe(
        Effect.withSpan("webhook.attempt", {
          kind: "client",
          attributes: {
            [ACCOUNT_ID]: claimed.account_id,
            ...sessionOf(claimed),
            "rbs.webhook.id": claimed.webhook_id,
            "rbs.webhook.delivery_id": claimed.id,
            "rbs.webhook.event_type": claimed.event_type,
            "rbs.webhook.attempt": claimed.attempts + 1
          }
        }),
        Effect.onInterrupt(() => queue.release(claimed)),
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
      const claimed = room > 0 ? yield* queue.claim(room) : []
      for (const each of claimed) {
        inFlight++
        yield* FiberSet.run(attempts, attempt(each))
      }
      // Nothing claimable, or no room: wait for a commit, a finished attempt, or the poll.
      if (claimed.length === 0 || inFlight >= NODE_CONCURRENCY) {
        const idle = listener.listening() && inFlight === 0 && !(yield* queue.waiting)
        yield* Effect.raceFirst(Queue.take(wake), Wake.pollPause(idle ? IDLE_POLL_MS : POLL_MS))
      }
    }).pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logError("webhook.claim_failed", { cause }).pipe(Effect.andThen(Wake.pollPause(POLL_MS)))
      ),
      Effect.forever
    )

    // Commits with new work NOTIFY: every node's deliverer looks at once instead of at its next poll.
    const listener = yield* Wake.listen(WAKE_CHANNEL, wake)

    yield* Effect.forkScoped(loop)
  })
)
