import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { Billing } from "../../../src/features/billing/Billing.ts"
import { Idempotency } from "../../../src/features/idempotency/Idempotency.ts"
import { request, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const account = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

const rowsOf = (keyId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{
      n: string
    }>`SELECT count(*)::text AS n FROM sessions WHERE api_key_id = ${keyId}`
    return Number(rows[0]!.n)
  }).pipe(Effect.orDie)

layer(TestService.layer({ browserPoolSize: 1 }), { excludeTestServices: true })(
  "Idempotency-Key on POST /v1/sessions",
  (it) => {
    it.effect("a retry with the same key and body gets the first response and starts no second browser", () =>
      Effect.gen(function* () {
        const { key, keyId } = yield* account
        const headers = { "idempotency-key": "retry-1" }
        const first = yield* api("POST", "/v1/sessions", { key, headers, body: { ttl_seconds: 120 } })
        assert.strictEqual(first.status, 201)
        assert.isNull(first.headers.get("idempotent-replayed"))
        // Same body, keys in another order and whitespace: the same request.
        const again = yield* api("POST", "/v1/sessions", { key, headers, rawBody: '{ "ttl_seconds" : 120 }' })
        assert.strictEqual(again.status, 201)
        assert.deepStrictEqual(again.json, first.json)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        // The replay spends nothing of the creation budget, and says where it stands.
        assert.strictEqual(again.headers.get("x-ratelimit-limit"), first.headers.get("x-ratelimit-limit"))
        assert.strictEqual(
          again.headers.get("x-ratelimit-remaining"),
          first.headers.get("x-ratelimit-remaining")
        )
        assert.strictEqual(yield* rowsOf(keyId), 1)

        const different = yield* api("POST", "/v1/sessions", { key, headers, body: { ttl_seconds: 300 } })
        assert.strictEqual(different.status, 409)
        assert.deepStrictEqual(different.json, {
          error: {
            code: "idempotency_conflict",
            message: "Idempotency-Key was already used with a different request."
          }
        })
        // Keys belong to an account: another account's same key is its own.
        const other = yield* account
        const theirs = yield* api("POST", "/v1/sessions", {
          key: other.key,
          headers,
          body: { ttl_seconds: 120 }
        })
        assert.strictEqual(theirs.status, 201)
        assert.notStrictEqual(theirs.json.id, first.json.id)
        for (const [k, id] of [
          [key, first.json.id],
          [other.key, theirs.json.id]
        ]) {
          yield* api("DELETE", `/v1/sessions/${id}`, { key: k })
        }
      })
    )

    it.effect("concurrent requests with one key create one session and all answer it", () =>
      Effect.gen(function* () {
        const { key, keyId } = yield* account
        const answers = yield* Effect.forEach(
          Array.from({ length: 6 }),
          () => api("POST", "/v1/sessions", { key, headers: { "idempotency-key": "burst" }, body: {} }),
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual(
          answers.map((answer) => answer.status),
          Array(6).fill(201)
        )
        assert.strictEqual(new Set(answers.map((answer) => answer.json.id)).size, 1)
        assert.strictEqual(yield* rowsOf(keyId), 1)
        yield* api("DELETE", `/v1/sessions/${answers[0]!.json.id}`, { key })
      })
    )

    it.effect("a refusal is not remembered, an expired key starts afresh, and a bad key is 400", () =>
      Effect.gen(function* () {
        const { key, keyId } = yield* account
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ id: string }>`SELECT account_id AS id FROM api_keys WHERE id = ${keyId}`
        yield* sql`UPDATE account_balances SET balance_micro_usd = 0 WHERE account_id = ${row!.id}`
        const headers = { "idempotency-key": "after-topup" }
        const refused = yield* api("POST", "/v1/sessions", { key, headers, body: {} })
        assert.strictEqual(refused.status, 402)
        const billing = yield* Billing
        yield* billing.credit({ accountId: row!.id, amount: 1_000_000n, kind: "grant", description: "test" })
        const admitted = yield* api("POST", "/v1/sessions", { key, headers, body: {} })
        assert.strictEqual(admitted.status, 201, "the retry after a top-up goes through")

        yield* sql`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = 'after-topup'`
        const fresh = yield* api("POST", "/v1/sessions", { key, headers, body: { ttl_seconds: 60 } })
        assert.strictEqual(fresh.status, 201, "after 24 hours the key is free again, whatever the body")
        assert.notStrictEqual(fresh.json.id, admitted.json.id)

        for (const bad of ["x".repeat(256), "tab\there"]) {
          const response = yield* api("POST", "/v1/sessions", {
            key,
            headers: { "idempotency-key": bad },
            body: {}
          })
          assert.strictEqual(response.status, 400)
          assert.deepStrictEqual(response.json.error, {
            code: "invalid_field",
            message: "Invalid value for field: Idempotency-Key."
          })
        }
        for (const id of [admitted.json.id, fresh.json.id])
          yield* api("DELETE", `/v1/sessions/${id}`, { key })

        // Keys past the window are purged (hourly, once across nodes).
        yield* sql`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = 'after-topup'`
        const idempotency = yield* Idempotency
        assert.isAtLeast(yield* idempotency.purge, 1)
        const left = yield* sql`SELECT key FROM idempotency_keys WHERE key = 'after-topup'`
        assert.strictEqual(left.length, 0)
      })
    )
  }
)
