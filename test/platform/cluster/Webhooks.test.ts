import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { request, signUp } from "../../support/Client.ts"
import { startNode } from "../../support/Nodes.ts"
import { stop } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"
import * as WebhookReceiver from "../../support/WebhookReceiver.ts"

describe("several nodes: webhooks", () => {
  it.live(
    "two node processes deliver one account's events: each once, from both nodes",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const env = { BROWSER_POOL_SIZE: "0", WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32" }
        const a = yield* startNode(databaseUrl, env)
        const b = yield* startNode(databaseUrl, env)
        const account = yield* signUp(a.baseUrl)
        // A slow endpoint, so both nodes' deliverers find work.
        const receiver = yield* WebhookReceiver.serveWith({ delayMs: 50 })
        const hook = yield* request(b.baseUrl, "POST", "/v1/webhooks", {
          key: account.key,
          body: { url: receiver.url, events: ["key.created"] }
        })
        assert.strictEqual(hook.status, 201, hook.text)
        // Events committed on either node (a new API key each), one at a time: every commit wakes
        // both deliverers, which race for it. Committed all at once, the node that took the first
        // four could keep the endpoint's four places to itself (it claims again as each ends),
        // and whether the other node ever delivered depended on the machine's timing.
        yield* Effect.forEach(
          Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b)),
          (node) =>
            request(node.baseUrl, "POST", "/v1/keys", { cookie: account.cookie, body: { name: "k" } }).pipe(
              Effect.andThen(Effect.sleep("100 millis"))
            ),
          { discard: true }
        )
        const received = yield* receiver.waitFor(40, 30_000)
        yield* Effect.sleep("1 second")
        assert.lengthOf(receiver.received, 40, "no event twice")
        assert.strictEqual(new Set(received.map((r) => r.headers["webhook-id"])).size, 40)
        const attempts = yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{ node_id: string; number: number; status_code: number }>`
            SELECT node_id, number, status_code FROM webhook_attempts`
        }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })))
        assert.lengthOf(attempts, 40, "one attempt each")
        assert.isTrue(attempts.every((attempt) => attempt.number === 1 && attempt.status_code === 200))
        assert.deepStrictEqual(
          [...new Set(attempts.map((attempt) => attempt.node_id))].sort(),
          [a.nodeId, b.nodeId].sort(),
          "both nodes delivered"
        )
        for (const node of [b, a]) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a node that stops mid-delivery hands its attempts over: the other node delivers every event",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const env = { BROWSER_POOL_SIZE: "0", WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32" }
        // Node b alone takes the deliveries, and the endpoint holds them unanswered.
        const b = yield* startNode(databaseUrl, env)
        const account = yield* signUp(b.baseUrl)
        const receiver = yield* WebhookReceiver.serveWith()
        const hook = yield* request(b.baseUrl, "POST", "/v1/webhooks", {
          key: account.key,
          body: { url: receiver.url, events: ["key.created"] }
        })
        assert.strictEqual(hook.status, 201, hook.text)
        receiver.hold()
        const events = 3
        for (let i = 0; i < events; i++)
          yield* request(b.baseUrl, "POST", "/v1/keys", { cookie: account.cookie, body: { name: "k" } })
        while (receiver.arrived() < events) yield* Effect.sleep("100 millis")

        // Node a joins; b stops with its three attempts in flight; the endpoint answers again.
        const a = yield* startNode(databaseUrl, env)
        assert.strictEqual(yield* stop(b.child, "SIGTERM"), 0)
        receiver.release()

        const query = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
          Effect.flatMap(SqlClient.SqlClient, f).pipe(
            Effect.orDie,
            Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 }))
          )
        const deadline = Date.now() + 30_000
        while (true) {
          const states = yield* query(
            (sql) => sql<{ state: string; n: number }>`
              SELECT state, count(*)::int AS n FROM webhook_deliveries GROUP BY state`
          )
          if (states.length === 1 && states[0]!.state === "succeeded" && states[0]!.n === events) break
          assert.isBelow(Date.now(), deadline, `deliveries ${JSON.stringify(states)}`)
          yield* Effect.sleep("250 millis")
        }
        const attempts = yield* query(
          (sql) => sql<{ node_id: string; number: number; status_code: number | null; error: string | null }>`
            SELECT node_id, number, status_code, error FROM webhook_attempts ORDER BY delivery_id, number`
        )
        assert.deepStrictEqual(
          attempts.map((attempt) => [attempt.number, attempt.node_id, attempt.status_code]),
          Array.from({ length: events }, () => [
            [1, b.nodeId, null],
            [2, a.nodeId, 200]
          ]).flat()
        )
        for (const attempt of attempts.filter((attempt) => attempt.status_code === null))
          assert.match(attempt.error ?? "", /interrupted: the service stopped/)
        const ids = new Set(receiver.received.map((r) => r.headers["webhook-id"]))
        assert.strictEqual(ids.size, events, "every event arrived")
        assert.strictEqual(yield* stop(a.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    120_000
  )
})
