import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import puppeteer from "puppeteer-core"
import { systemOwner } from "../../../src/kernel/Owner.ts"
import { Sessions } from "../../../src/features/sessions/Sessions.ts"
import { daysOf, periodStart } from "../../../src/features/usage/Usage.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"
import * as TrafficServer from "../../support/TrafficServer.ts"

const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

describe("the billing period", () => {
  it("is the calendar month in UTC, every day of it so far", () => {
    const at = new Date("2026-03-04T10:00:00Z")
    assert.strictEqual(periodStart(at).toISOString(), "2026-03-01T00:00:00.000Z")
    assert.deepStrictEqual(daysOf(periodStart(at), at), [
      "2026-03-01",
      "2026-03-02",
      "2026-03-03",
      "2026-03-04"
    ])
    assert.strictEqual(
      periodStart(new Date("2026-12-31T23:59:59Z")).toISOString(),
      "2026-12-01T00:00:00.000Z"
    )
  })
})

layer(TestService.layer({ browserPoolSize: 1 }), { excludeTestServices: true })("GET /v1/usage", (it) => {
  /** A session of `key` that downloads `bytes` from the traffic server, then is deleted. */
  const meteredSession = (key: string, url: string, bytes: number) =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const created = yield* api("POST", "/v1/sessions", { key, body: {} })
      const session = yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
      const browser = yield* Effect.promise(() =>
        puppeteer.connect({ browserWSEndpoint: session.cdp_url, headers: { authorization: `Bearer ${key}` } })
      )
      const [tab] = yield* Effect.promise(() => browser.pages())
      yield* Effect.promise(() => tab!.goto(`${url}/page`))
      yield* Effect.promise(() =>
        tab!.evaluate(async (n) => (await (await fetch(`/bytes?n=${n}`)).arrayBuffer()).byteLength, bytes)
      )
      yield* Effect.promise(() => browser.disconnect())
      yield* api("DELETE", `/v1/sessions/${session.id}`, { key })
      return (yield* api("GET", `/v1/sessions/${session.id}`, { key })).json
    })

  it.effect(
    "totals, by region, by key (library and removed keys under null) and every day, agreeing with the ledger",
    () =>
      Effect.gen(function* () {
        const traffic = yield* TrafficServer.serve("127.0.0.1")
        const owner = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const second = yield* api("POST", "/v1/keys", { cookie: owner.cookie, body: { name: "ci" } })
        const doomed = yield* api("POST", "/v1/keys", { cookie: owner.cookie, body: { name: "old" } })
        const sql = yield* SqlClient.SqlClient
        const [account] = yield* sql<{
          id: string
        }>`SELECT account_id AS id FROM api_keys WHERE id = ${owner.keyId}`

        const a = yield* meteredSession(owner.key, traffic.http, 300_000)
        const b = yield* meteredSession(second.json.secret, traffic.http, 500_000)
        const c = yield* meteredSession(doomed.json.secret, traffic.http, 100_000)
        // A session made through the library has no key.
        const sessions = yield* Sessions
        const library = yield* sessions.create(systemOwner(account!.id), {})
        yield* sessions.close(systemOwner(account!.id), library.id)
        // A key removed from the table later: its sessions move under key_id null (the API only revokes keys).
        yield* sql`DELETE FROM api_keys WHERE id = ${doomed.json.id}`
        // Last month's session is not this period's.
        yield* sql`
        INSERT INTO sessions (id, account_id, api_key_id, status, profile, device, ttl_seconds, node_id, created_at, expires_at, bytes_up, bytes_down, billed_micro_usd)
        VALUES ('sess_00000000-0000-0000-0000-00000000aaaa', ${account!.id}, ${owner.keyId}, 'closed', 'default', '', 60, 'local',
          date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 hour', now(), 999999, 999999, 9999)`

        const usage = yield* api("GET", "/v1/usage", { key: owner.key })
        assert.strictEqual(usage.status, 200, usage.text)
        const report = usage.json
        assert.strictEqual(report.period, "current")
        const now = new Date()
        assert.strictEqual(report.from, periodStart(now).toISOString())
        assert.isTrue(Math.abs(Date.parse(report.to) - now.getTime()) < 60_000)

        const metered = [a, b, c]
        const up = metered.reduce((sum, s) => sum + s.bytes_up, 0)
        const down = metered.reduce((sum, s) => sum + s.bytes_down, 0)
        const ledger = yield* sql<{ total: string }>`
        SELECT coalesce(-sum(amount_micro_usd), 0)::text AS total FROM ledger_entries
        WHERE account_id = ${account!.id} AND kind = 'session_egress'`
        assert.deepStrictEqual(report.totals, {
          bytes_up: up,
          bytes_down: down,
          bytes_total: up + down,
          sessions: 4,
          billed_micro_usd: Number(ledger[0]!.total)
        })
        assert.isAbove(report.totals.billed_micro_usd, 4000, "900 KB cost at least 4,500 micro-USD")
        assert.deepStrictEqual(report.by_region, [
          {
            region: "local",
            sessions: 4,
            bytes_total: up + down,
            billed_micro_usd: report.totals.billed_micro_usd
          }
        ])

        const byKey = new Map(report.by_key.map((entry: any) => [entry.key_id, entry]))
        assert.strictEqual(report.by_key.length, 3)
        const first: any = byKey.get(owner.keyId)
        assert.deepStrictEqual(
          [first.key_prefix, first.key_name, first.sessions, first.bytes_total],
          [owner.key.slice(0, 12), "test", 1, a.bytes_up + a.bytes_down]
        )
        const ci: any = byKey.get(second.json.id)
        assert.deepStrictEqual([ci.key_name, ci.sessions], ["ci", 1])
        const orphan: any = byKey.get(null)
        assert.deepStrictEqual(
          [orphan.key_prefix, orphan.key_name, orphan.sessions, orphan.bytes_total],
          [null, null, 2, c.bytes_up + c.bytes_down]
        )
        const billedByKey = report.by_key.reduce((sum: number, entry: any) => sum + entry.billed_micro_usd, 0)
        assert.strictEqual(billedByKey, report.totals.billed_micro_usd)

        const days = daysOf(periodStart(now), now)
        assert.deepStrictEqual(
          report.by_day.map((day: any) => day.date),
          days
        )
        const today = report.by_day[report.by_day.length - 1]
        assert.deepStrictEqual([today.sessions, today.bytes_total], [4, up + down])
        for (const day of report.by_day.slice(0, -1))
          assert.deepStrictEqual([day.sessions, day.bytes_total], [0, 0])

        const other = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const empty = (yield* api("GET", "/v1/usage", { key: other.key })).json
        assert.deepStrictEqual(empty.totals, {
          bytes_up: 0,
          bytes_down: 0,
          bytes_total: 0,
          sessions: 0,
          billed_micro_usd: 0
        })
        assert.deepStrictEqual([empty.by_region, empty.by_key], [[], []])
        assert.strictEqual(empty.by_day.length, days.length)
        assert.strictEqual((yield* api("GET", "/v1/usage")).status, 401)
      }).pipe(Effect.scoped)
  )

  it.effect(
    "a test-mode key's sessions are metered, reported and charged like a live key's: no balance buys free traffic",
    () =>
      Effect.gen(function* () {
        const traffic = yield* TrafficServer.serve("127.0.0.1")
        const owner = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const sql = yield* SqlClient.SqlClient
        const [account] = yield* sql<{
          id: string
        }>`SELECT account_id AS id FROM api_keys WHERE id = ${owner.keyId}`
        const test = yield* api("POST", "/v1/keys", {
          cookie: owner.cookie,
          body: { name: "sandbox", mode: "test" }
        })
        assert.match(test.json.secret, /^svc_test_/)
        assert.strictEqual(test.json.mode, "test")
        // No balance at all: a test key is no way around billing, it is refused like a live one.
        yield* sql`UPDATE account_balances SET balance_micro_usd = 0 WHERE account_id = ${account!.id}`
        assert.strictEqual((yield* api("POST", "/v1/sessions", { key: owner.key, body: {} })).status, 402)
        assert.strictEqual(
          (yield* api("POST", "/v1/sessions", { key: test.json.secret, body: {} })).status,
          402
        )
        // One micro-dollar: far less than the traffic below costs. The session runs (the gate asks for
        // a balance above zero), and is charged all of it when it ends.
        yield* sql`UPDATE account_balances SET balance_micro_usd = 1 WHERE account_id = ${account!.id}`

        const session = yield* meteredSession(test.json.secret, traffic.http, 2_000_000)
        const bytes = session.bytes_up + session.bytes_down
        assert.isAbove(bytes, 2_000_000)
        const charge = Math.floor(bytes / 200)
        const [row] = yield* sql<{ live: boolean; billed: string }>`
        SELECT live, billed_micro_usd::text AS billed FROM sessions WHERE id = ${session.id}`
        assert.deepStrictEqual({ ...row }, { live: false, billed: String(charge) })
        const debits = yield* sql<{ amount: string }>`
        SELECT amount_micro_usd::text AS amount FROM ledger_entries WHERE account_id = ${account!.id} AND kind = 'session_egress'`
        assert.deepStrictEqual(
          debits.map((entry) => entry.amount),
          [String(-charge)]
        )
        const [money] = yield* sql<{ balance: string }>`
        SELECT balance_micro_usd::text AS balance FROM account_balances WHERE account_id = ${account!.id}`
        assert.strictEqual(money!.balance, String(1 - charge))
        // Now below zero: the next session of either key is refused.
        assert.strictEqual(
          (yield* api("POST", "/v1/sessions", { key: test.json.secret, body: {} })).status,
          402
        )

        const usage = (yield* api("GET", "/v1/usage", { key: test.json.secret })).json
        assert.strictEqual(usage.totals.sessions, 1)
        assert.strictEqual(usage.totals.bytes_total, bytes)
        assert.strictEqual(usage.totals.billed_micro_usd, charge)
        assert.deepStrictEqual(
          usage.by_key.map((entry: any) => [entry.key_id, entry.sessions, entry.billed_micro_usd]),
          [[test.json.id, 1, charge]]
        )
      }).pipe(Effect.scoped)
  )
})
