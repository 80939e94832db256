import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import * as Crypto from "node:crypto"
import { Audit } from "../../../src/features/audit/Audit.ts"
import { Secrets } from "../../../src/platform/crypto/Secrets.ts"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { AuditConfig } from "../../../src/features/audit/AuditConfig.ts"
import { AccountBounds } from "../../../src/features/limits/AccountBounds.ts"
import { LimitsConfig } from "../../../src/features/limits/LimitsConfig.ts"
import * as Migrations from "../../../src/platform/db/Migrations.ts"
import { systemOwner } from "../../../src/kernel/Owner.ts"
import { Egress } from "../../../src/platform/net/Egress.ts"
import { LocalPorts } from "../../../src/platform/net/LocalPorts.ts"
import * as Deliverer from "../../../src/features/webhooks/Deliverer.ts"
import { WebhookOutbox } from "../../../src/features/webhooks/Outbox.ts"
import { WebhookDeliveries } from "../../../src/features/webhooks/WebhookDeliveries.ts"
import { Webhooks } from "../../../src/features/webhooks/Webhooks.ts"
import { settle, until } from "../../support/Poll.ts"
import * as TestService from "../../support/TestService.ts"
import * as WebhookReceiver from "../../support/WebhookReceiver.ts"

const states = (want: ReadonlyArray<string>) => (got: ReadonlyArray<string>) =>
  [...got].sort().join() === [...want].sort().join()

/** The webhook pieces of one node, on its own connections to the shared database. */
const nodeLayer = (url: string, dataDir: string, nodeId: string) =>
  Layer.mergeAll(Webhooks.layer, WebhookDeliveries.layer, WebhookOutbox.layer).pipe(
    Layer.provideMerge(Layer.mergeAll(Egress.layer, Secrets.layer, Audit.layer, AccountBounds.layer)),
    Layer.provideMerge(LocalPorts.layer),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 })),
    Layer.provideMerge(Layer.merge(AuditConfig.layer, LimitsConfig.layer)),
    Layer.provideMerge(
      ServiceConfig.layer({ dataDir, nodeId, webhookAllowCidrs: "127.0.0.1/32", logLevel: "Error" })
    )
  )

/** A node's deliverer, running until its scope closes (its node stopping), or the test's does. */
const startDeliverer = (url: string, dataDir: string, nodeId: string) =>
  Effect.gen(function* () {
    const scope = yield* Effect.acquireRelease(Scope.make(), (scope) => Scope.close(scope, Exit.void))
    yield* Layer.buildWithScope(Deliverer.layer.pipe(Layer.provide(nodeLayer(url, dataDir, nodeId))), scope)
    return scope
  })

const setupWith = (receiverOptions: { readonly delayMs?: number } = {}) =>
  Effect.gen(function* () {
    const url = yield* TestService.freshDatabase
    const dataDir = yield* TestService.freshDataDir
    yield* Effect.provide(
      Effect.void,
      Migrations.layer().pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url) })))
    )
    const receiver = yield* WebhookReceiver.serveWith(receiverOptions)
    const accountId = Crypto.randomUUID()
    const context = yield* Layer.build(nodeLayer(url, dataDir, "test"))
    const sql = Context.get(context, SqlClient.SqlClient)
    yield* sql`INSERT INTO accounts (id, name, kind, created_at) VALUES (${accountId}, 'a', 'personal', now())`
    const webhooks = Context.get(context, Webhooks)
    const outbox = Context.get(context, WebhookOutbox)
    const hook = yield* webhooks.create(systemOwner(accountId), {
      url: receiver.url,
      events: ["session.ready"]
    })
    const emit = (n = 1) =>
      Effect.forEach(
        Array.from({ length: n }, (_, i) => i),
        (i) =>
          sql.withTransaction(
            outbox.emit(accountId, "session.ready", {
              id: `sess_${i}`,
              session_type: "browser",
              status: "ready",
              region: "local",
              created_at: "2026-11-23T00:00:00.000Z",
              ready_at: "2026-11-23T00:00:01.000Z",
              expires_at: "2026-11-23T00:30:00.000Z",
              ended_at: null,
              ended_reason: null,
              bytes_up: 0,
              bytes_down: 0,
              metadata: {}
            })
          ),
        { discard: true }
      )
    const attempts = sql<{
      number: number
      series: number
      node_id: string
      status_code: number | null
      error: string | null
    }>`
    SELECT a.number, a.series, a.node_id, a.status_code, a.error FROM webhook_attempts a
    ORDER BY a.started_at, a.number`
    const state = Effect.map(sql<{ state: string }>`SELECT state FROM webhook_deliveries`, (rows) =>
      rows.map((r) => r.state)
    )
    return {
      url,
      dataDir,
      receiver,
      sql,
      hook,
      emit,
      attempts,
      state,
      accountId,
      deliveries: Context.get(context, WebhookDeliveries)
    }
  })
const setup = setupWith()

describe("webhook deliverer", () => {
  it.effect(
    "retries on the documented schedule (TestClock): 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then failed",
    () =>
      Effect.gen(function* () {
        const { url, dataDir, receiver, emit, attempts, state, sql } = yield* setup
        receiver.answer(...Array.from({ length: 8 }, () => 500))
        yield* startDeliverer(url, dataDir, "a")
        yield* emit()
        yield* receiver.waitFor(1)
        const waits = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]
        // After moving the clock, a NOTIFY (as any commit with work sends) wakes the deliverer at once.
        const advance = (ms: number) =>
          Effect.gen(function* () {
            yield* TestClock.adjust(ms)
            yield* settle(100)
            yield* sql`SELECT pg_notify('rbs_webhooks', '')`
            yield* settle(300)
          })
        for (const [i, wait] of waits.entries()) {
          // Not before 90% of the wait (the jitter's floor)...
          yield* settle(150)
          yield* advance(Math.floor(wait * 0.89))
          assert.lengthOf(receiver.received, i + 1, `attempt ${i + 2} came before ${wait * 0.89} ms`)
          // ...and by 110% of it.
          yield* advance(Math.ceil(wait * 0.22))
          yield* receiver.waitFor(i + 2)
        }
        assert.deepStrictEqual(yield* until(state, states(["failed"])), ["failed"])
        const log = yield* attempts
        assert.deepStrictEqual(
          log.map((a) => [a.number, a.status_code]),
          Array.from({ length: 8 }, (_, i) => [i + 1, 500])
        )
        yield* advance(48 * 3_600_000)
        assert.lengthOf(receiver.received, 8, "no attempt after the last")
      }).pipe(Effect.scoped),
    60_000
  )

  it.effect(
    "an endpoint failing 5 times in a row has its circuit opened for a minute, then is tried again",
    () =>
      Effect.gen(function* () {
        const { url, dataDir, receiver, emit, sql } = yield* setup
        const nudge = Effect.andThen(sql`SELECT pg_notify('rbs_webhooks', '')`, settle(400))
        receiver.answer(500, 500, 500, 500, 500)
        yield* startDeliverer(url, dataDir, "a")
        yield* emit(5)
        yield* receiver.waitFor(5)
        const [hook] = yield* until(
          sql<{ consecutive_failures: number; circuit_open_until: Date | null }>`
            SELECT consecutive_failures, circuit_open_until FROM webhooks`,
          (rows) => rows[0]?.consecutive_failures === 5
        )
        assert.strictEqual(hook!.consecutive_failures, 5)
        assert.isNotNull(hook!.circuit_open_until)
        // A new event waits while the circuit is open, as do the retries (due after 5 s).
        yield* emit(1)
        yield* nudge
        yield* TestClock.adjust("30 seconds")
        yield* nudge
        assert.lengthOf(receiver.received, 5, "nothing is sent to an open circuit")
        yield* TestClock.adjust("31 seconds")
        yield* nudge
        yield* receiver.waitFor(6)
        const [after] = yield* until(
          sql<{ consecutive_failures: number }>`SELECT consecutive_failures FROM webhooks`,
          (rows) => rows[0]?.consecutive_failures === 0
        )
        assert.strictEqual(after!.consecutive_failures, 0, "a success closes it")
      }).pipe(Effect.scoped),
    60_000
  )

  it.live("sends at most 4 attempts at once to one endpoint, however many are due", () =>
    Effect.gen(function* () {
      const { url, dataDir, receiver, emit } = yield* setupWith({ delayMs: 300 })
      yield* emit(12)
      yield* startDeliverer(url, dataDir, "a")
      yield* receiver.waitFor(12)
      assert.strictEqual(receiver.peak.most, 4)
    }).pipe(Effect.scoped)
  )

  it.live("with nothing waiting, waits for a commit's NOTIFY instead of polling every second", () =>
    Effect.gen(function* () {
      const { url, dataDir, receiver, emit, sql, hook, accountId, state } = yield* setup
      yield* startDeliverer(url, dataDir, "a")
      yield* emit()
      yield* receiver.waitFor(1)
      assert.deepStrictEqual(yield* until(state, states(["succeeded"])), ["succeeded"])
      // Work that appears without a NOTIFY (no commit of ours makes any) waits for the idle poll...
      yield* settle(300)
      yield* sql`
        INSERT INTO webhook_events (id, account_id, type, data, created_at)
        VALUES ('evt_quiet', ${accountId}, 'session.ready', '{"id":"sess_quiet"}'::jsonb, now())`
      yield* sql`
        INSERT INTO webhook_deliveries
          (id, webhook_id, event_id, account_id, event_type, state, next_attempt_at, created_at, updated_at)
        VALUES ('whd_quiet', ${hook.id}, 'evt_quiet', ${accountId}, 'session.ready', 'pending', now(), now(), now())`
      yield* settle(2_500)
      assert.lengthOf(receiver.received, 1, "an idle deliverer made no claim in 2.5 s")
      // ...and a NOTIFY brings it at once.
      yield* sql`SELECT pg_notify('rbs_webhooks', '')`
      yield* receiver.waitFor(2)
    }).pipe(Effect.scoped)
  )

  it.effect("keeps finished deliveries 30 days, then purges them with their events; open ones stay", () =>
    Effect.gen(function* () {
      const { url, dataDir, receiver, emit, sql, deliveries, state } = yield* setup
      receiver.answer(200, 500)
      const node = yield* startDeliverer(url, dataDir, "a")
      yield* emit(2)
      yield* receiver.waitFor(2)
      yield* until(state, states(["pending", "succeeded"]))
      // Stopped, so the failed one stays pending through the month.
      yield* Scope.close(node, Exit.void)
      assert.deepStrictEqual((yield* state).sort(), ["pending", "succeeded"])
      yield* TestClock.adjust("29 days")
      assert.strictEqual(yield* deliveries.purge, 0)
      yield* TestClock.adjust("2 days")
      assert.strictEqual(yield* deliveries.purge, 1)
      assert.deepStrictEqual(yield* state, ["pending"])
      const [events] = yield* sql<{ count: number }>`SELECT count(*)::int AS count FROM webhook_events`
      assert.strictEqual(events!.count, 1, "the finished delivery's event went with it")
    }).pipe(Effect.scoped)
  )

  it.live(
    "a restart mid-series resumes it on time, and a lease left by a dead node is taken over as a new attempt",
    () =>
      Effect.gen(function* () {
        const { url, dataDir, receiver, emit, attempts, state, sql } = yield* setup
        receiver.answer(500)
        const first = yield* startDeliverer(url, dataDir, "a")
        yield* emit()
        yield* receiver.waitFor(1)
        yield* until(state, states(["pending"]))
        // The node stops between attempt 1 and attempt 2 (due 5 s later); another start picks the series up.
        yield* Scope.close(first, Exit.void)
        const second = yield* startDeliverer(url, dataDir, "a")
        const [, retried] = yield* receiver.waitFor(2)
        assert.isAbove(retried!.at - receiver.received[0]!.at, 4_400)
        assert.deepStrictEqual(yield* until(state, states(["succeeded"])), ["succeeded"])
        assert.deepStrictEqual(
          (yield* attempts).map((a) => [a.number, a.status_code]),
          [
            [1, 500],
            [2, 200]
          ]
        )

        // A node died mid-attempt: its lease ran out and its attempt has no outcome.
        yield* sql`DELETE FROM webhook_attempts`
        yield* sql`DELETE FROM webhook_deliveries`
        yield* Scope.close(second, Exit.void)
        yield* emit()
        yield* sql`
          UPDATE webhook_deliveries SET state = 'delivering', attempts = 1, locked_by = 'dead/0000',
            locked_until = now() - interval '1 second'`
        yield* sql`
          INSERT INTO webhook_attempts (delivery_id, series, number, node_id, started_at)
          SELECT id, 1, 1, 'dead', now() - interval '61 seconds' FROM webhook_deliveries`
        yield* startDeliverer(url, dataDir, "b")
        yield* receiver.waitFor(3)
        const log = yield* until(attempts, (rows) => rows.length === 2 && rows[1]!.status_code !== null)
        assert.deepStrictEqual(
          log.map((a) => [a.number, a.node_id, a.status_code]),
          [
            [1, "dead", null],
            [2, "b", 200]
          ]
        )
        assert.match(log[0]!.error!, /abandoned/)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "two nodes drain one queue: every event arrives once, each attempt is sent by one node",
    () =>
      Effect.gen(function* () {
        const { url, dataDir, receiver, emit, attempts, state } = yield* setup
        yield* Effect.all([startDeliverer(url, dataDir, "a"), startDeliverer(url, dataDir, "b")])
        yield* settle(300)
        yield* emit(120)
        const received = yield* receiver.waitFor(120, 30_000)
        yield* settle(500)
        assert.lengthOf(receiver.received, 120, "no event twice")
        assert.strictEqual(new Set(received.map((r) => r.headers["webhook-id"])).size, 120)
        const log = yield* attempts
        assert.lengthOf(log, 120)
        assert.isTrue(
          log.every((a) => a.number === 1 && a.status_code === 200),
          "each delivery took exactly one attempt"
        )
        const byNode = new Set(log.map((a) => a.node_id))
        assert.deepStrictEqual([...byNode].sort(), ["a", "b"], "both nodes delivered")
        assert.isTrue((yield* state).every((s) => s === "succeeded"))
      }).pipe(Effect.scoped),
    60_000
  )
})
