import { assert, layer } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { spawn } from "node:child_process"
import * as Crypto from "node:crypto"
import { Billing } from "../../../src/features/billing/Billing.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"
import * as TrafficServer from "../../support/TrafficServer.ts"

const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const account = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

const summaryOf = (key: string) =>
  Effect.map(api("GET", "/v1/billing/summary", { key }), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return response.json
  })

const accountIdOf = (keyId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ id: string }>`SELECT account_id AS id FROM api_keys WHERE id = ${keyId}`
    return row!.id
  })

/**
 * A node of the previous version, still running during a rolling deploy across sql/0020: its
 * BillingRepo's statements, which know only the money columns of `accounts`. A credit locks the
 * account row, appends the entry and writes the new balance; `whileLocked` runs between the lock and
 * the writes.
 */
const oldNode = {
  credit: (accountId: string, amount: bigint, whileLocked: Effect.Effect<void> = Effect.void) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          const [money] = yield* sql<{ balance_micro_usd: unknown; egress_carry_bytes: unknown }>`
            SELECT balance_micro_usd, egress_carry_bytes FROM accounts WHERE id = ${accountId} FOR UPDATE`
          yield* whileLocked
          const balance = BigInt(String(money!.balance_micro_usd)) + amount
          yield* sql`
            INSERT INTO ledger_entries (id, account_id, kind, amount_micro_usd, balance_after_micro_usd, description,
              session_id, provider, provider_payment_id, created_at)
            VALUES (${Crypto.randomUUID()}, ${accountId}, 'grant', ${amount}, ${balance}, 'old node', ${null},
              ${null}, ${null}, ${new Date()})
            ON CONFLICT (provider, provider_payment_id) WHERE provider_payment_id IS NOT NULL DO NOTHING
            RETURNING *`
          yield* sql`
            UPDATE accounts SET balance_micro_usd = ${balance}, egress_carry_bytes = ${BigInt(String(money!.egress_carry_bytes))}
            WHERE id = ${accountId}`
          return balance
        })
      )
    }).pipe(Effect.orDie),
  setLowBalanceThreshold: (accountId: string, micro: bigint) =>
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) => sql`UPDATE accounts SET balance_low_threshold_micro_usd = ${micro} WHERE id = ${accountId}`
    ).pipe(Effect.orDie),
  /** The figures it reads. */
  money: (accountId: string) =>
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) => sql<{ balance: string; carry: string; threshold: string }>`
        SELECT balance_micro_usd::text AS balance, egress_carry_bytes::text AS carry,
          balance_low_threshold_micro_usd::text AS threshold
        FROM accounts WHERE id = ${accountId}`
    ).pipe(
      Effect.map((rows) => ({ ...rows[0]! })),
      Effect.orDie
    )
}

/** The local provider's flow as a payer's browser does it: open the page, press its one button. */
const payLocally = (cookie: string, checkoutUrl: string) =>
  Effect.gen(function* () {
    const url = new URL(checkoutUrl)
    const page = yield* api("GET", url.pathname, { cookie })
    assert.strictEqual(page.status, 200, page.text)
    assert.include(page.headers.get("content-type")!, "text/html")
    assert.strictEqual(page.text.match(/<form /g)?.length, 1, `one form: ${page.text}`)
    assert.strictEqual(page.text.match(/<button /g)?.length, 1, "one button")
    const action = /<form method="post" action="([^"]+)"/.exec(page.text)![1]!
    return yield* api("POST", action, {
      cookie,
      rawBody: "",
      contentType: "application/x-www-form-urlencoded"
    })
  })

layer(TestService.layer({ browserPoolSize: 1, signupCreditUsd: 0 }), { excludeTestServices: true })(
  "balance, top-up with the local provider, and the ledger",
  (it) => {
    it.effect(
      "a zero balance is 402 payment_required; a top-up through the local checkout page credits once",
      () =>
        Effect.gen(function* () {
          const { key, cookie } = yield* account
          const refused = yield* api("POST", "/v1/sessions", { key, body: {} })
          assert.strictEqual(refused.status, 402)
          assert.deepStrictEqual(refused.json, {
            error: { code: "payment_required", message: "Insufficient balance." }
          })
          assert.strictEqual(
            (yield* api("GET", "/v1/sessions", { key })).json.data.length,
            0,
            "no row written"
          )

          const topup = yield* api("POST", "/v1/billing/topup", { cookie, body: { amount_usd: 25 } })
          assert.strictEqual(topup.status, 200, topup.text)
          assert.deepStrictEqual(Object.keys(topup.json), ["checkout_url"])
          const service = yield* TestService.TestService
          assert.match(
            topup.json.checkout_url,
            new RegExp(`^${service.baseUrl}/billing/checkout/[0-9a-f-]{36}$`)
          )
          assert.strictEqual(
            (yield* summaryOf(key)).balance_micro_usd,
            0,
            "nothing is credited before paying"
          )

          const paid = yield* payLocally(cookie, topup.json.checkout_url)
          assert.strictEqual(paid.status, 200)
          assert.include(paid.text, "25.000000 USD")
          // Submitting the form again (a reload, a double click) credits nothing more.
          const again = yield* api("POST", new URL(topup.json.checkout_url).pathname, { cookie })
          assert.strictEqual(again.status, 200)
          assert.include(again.text, "Top-up complete")
          const shown = yield* api("GET", new URL(topup.json.checkout_url).pathname, { cookie })
          assert.notInclude(shown.text, "<form", "a paid checkout offers no button")
          const summary = yield* summaryOf(key)
          assert.strictEqual(summary.balance_micro_usd, 25_000_000)
          assert.strictEqual(summary.balance_usd, "25.000000")
          assert.strictEqual(summary.currency, "usd")
          assert.deepStrictEqual(
            summary.recent_entries.map((entry: any) => [
              entry.kind,
              entry.amount_micro_usd,
              entry.balance_after_micro_usd
            ]),
            [["topup", 25_000_000, 25_000_000]]
          )

          const created = yield* api("POST", "/v1/sessions", { key, body: {} })
          assert.strictEqual(created.status, 201, "a positive balance admits sessions again")
          yield* api("DELETE", `/v1/sessions/${created.json.id}`, { key })
          const metrics = (yield* api("GET", "/metrics")).text
          assert.match(metrics, /rbs_ledger_credits_micro_usd_total\{kind="topup"\} [1-9]/)
          assert.match(metrics, /rbs_limit_rejections_total\{limit="balance"\} [1-9]/)
        })
    )

    it.effect("top-up is cookie-only, at least 10 whole dollars; a checkout is the account's own", () =>
      Effect.gen(function* () {
        const { key, cookie } = yield* account
        const other = yield* account
        const bearer = yield* api("POST", "/v1/billing/topup", { key, body: { amount_usd: 10 } })
        assert.deepStrictEqual([bearer.status, bearer.json.error.code], [403, "forbidden"])
        const anonymous = yield* api("POST", "/v1/billing/topup", { body: { amount_usd: 10 } })
        assert.deepStrictEqual([anonymous.status, anonymous.json.error.code], [401, "unauthorized"])
        for (const amount_usd of [9, 10.5, "10", -10, null, 100_001]) {
          const bad = yield* api("POST", "/v1/billing/topup", { cookie, body: { amount_usd } })
          assert.strictEqual(bad.status, 400, String(amount_usd))
          assert.deepStrictEqual(bad.json, {
            error: { code: "invalid_field", message: "Invalid value for field: amount_usd." }
          })
        }
        const checkout = yield* api("POST", "/v1/billing/checkout", { cookie, body: { amount_usd: 10 } })
        assert.strictEqual(checkout.status, 201, checkout.text)
        assert.strictEqual(checkout.json.object, "checkout")
        assert.strictEqual(checkout.json.provider, "local")
        assert.strictEqual(checkout.json.status, "open")
        assert.strictEqual(checkout.json.amount_usd, 10)
        const path = new URL(checkout.json.checkout_url).pathname
        const foreign = yield* api("GET", path, { cookie: other.cookie })
        assert.deepStrictEqual([foreign.status, foreign.json.error.code], [404, "checkout_not_found"])
        const foreignPay = yield* api("POST", path, { cookie: other.cookie })
        assert.strictEqual(foreignPay.status, 404)
        assert.strictEqual((yield* summaryOf(other.key)).balance_micro_usd, 0)
        const done = yield* api("GET", `${path}/done`, { cookie })
        assert.include(done.text, "Payment pending")
        // Started in the trail; another account's attempt to pay it is recorded in theirs.
        const mine = yield* api("GET", `/v1/audit/events?target=${checkout.json.id}`, { key })
        assert.deepStrictEqual(
          mine.json.data.map((e: any) => [e.action, e.outcome]),
          [["billing.checkout_started", "success"]]
        )
        assert.deepInclude(mine.json.data[0].details, { amount_usd: 10, provider: "local" })
        const theirs = yield* api("GET", `/v1/audit/events?target=${checkout.json.id}`, { key: other.key })
        assert.deepStrictEqual(
          theirs.json.data.map((e: any) => [e.action, e.outcome, e.details.code]),
          [["billing.topup_credited", "failure", "checkout_not_found"]]
        )
      })
    )

    it.effect("the billing contact is set with a key or the cookie, field by field", () =>
      Effect.gen(function* () {
        const { key, cookie } = yield* account
        const set = yield* api("POST", "/v1/billing/account", {
          key,
          body: {
            name: "Ada Lovelace",
            email: "billing@example.com",
            address: { line1: "1 Analytical Way", city: "London", postal_code: "N1", country: "GB" },
            tax_id: "GB123456789"
          }
        })
        assert.strictEqual(set.status, 200, set.text)
        assert.strictEqual(set.json.billing_contact.name, "Ada Lovelace")
        const partial = yield* api("POST", "/v1/billing/account", { cookie, body: { tax_id: null } })
        assert.strictEqual(
          partial.json.billing_contact.name,
          "Ada Lovelace",
          "fields left out keep their value"
        )
        assert.isNull(partial.json.billing_contact.tax_id, "null clears")
        assert.strictEqual(partial.json.billing_contact.address.country, "GB")
        const summary = yield* summaryOf(key)
        assert.strictEqual(summary.billing_contact.email, "billing@example.com")
        const bad = yield* api("POST", "/v1/billing/account", {
          key,
          body: { address: { country: "Britain" } }
        })
        assert.strictEqual(bad.status, 400)
        assert.strictEqual(bad.json.error.code, "invalid_field")
        assert.strictEqual((yield* api("GET", "/v1/billing/summary")).status, 401)
        const badKey = yield* api("GET", "/v1/billing/summary", { key: "svc_live_not-a-key" })
        assert.deepStrictEqual(badKey.json, {
          error: { code: "unauthorized", message: "Missing or invalid API key." }
        })
      })
    )

    it.effect("running sessions finish when the balance runs out; the next create is 402", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const traffic = yield* TrafficServer.serve("127.0.0.1")
        const user = yield* account
        const billing = yield* Billing
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{
          id: string
        }>`SELECT account_id AS id FROM api_keys WHERE id = ${user.keyId}`
        // 1,000 micro-USD buys 200,000 bytes.
        yield* billing.credit({ accountId: row!.id, amount: 1000n, kind: "grant", description: "test grant" })
        const created = yield* api("POST", "/v1/sessions", { key: user.key, body: {} })
        const session = yield* waitForSession(service.baseUrl, user.key, created.json.id, isReady)
        const puppeteer = (yield* Effect.promise(() => import("puppeteer-core"))).default
        const browser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: session.cdp_url,
            headers: { authorization: `Bearer ${user.key}` }
          })
        )
        const [tab] = yield* Effect.promise(() => browser.pages())
        yield* Effect.promise(() => tab!.goto(`${traffic.http}/page`))
        const fetched = yield* Effect.promise(() =>
          tab!.evaluate(async () => (await (await fetch("/bytes?n=1000000")).arrayBuffer()).byteLength)
        )
        assert.strictEqual(
          fetched,
          1_000_000,
          "the session is not cut off when its traffic outruns the balance"
        )
        yield* Effect.promise(() => browser.disconnect())
        assert.strictEqual(
          (yield* api("DELETE", `/v1/sessions/${session.id}`, { key: user.key })).status,
          204
        )

        const ended = (yield* api("GET", `/v1/sessions/${session.id}`, { key: user.key })).json
        const charge = Math.floor((ended.bytes_up + ended.bytes_down) / 200)
        const summary = yield* summaryOf(user.key)
        assert.strictEqual(summary.balance_micro_usd, 1000 - charge)
        assert.isBelow(summary.balance_micro_usd, 0)
        const debit = summary.recent_entries.find((entry: any) => entry.session_id === session.id)
        assert.deepStrictEqual([debit.kind, debit.amount_micro_usd], ["session_egress", -charge])
        // A node of the previous version, during a rolling deploy across sql/0020, sees the charge.
        const [carry] = yield* sql<{ carry: string }>`
          SELECT egress_carry_bytes::text AS carry FROM account_balances WHERE account_id = ${row!.id}`
        assert.deepInclude(yield* oldNode.money(row!.id), {
          balance: String(1000 - charge),
          carry: carry!.carry
        })
        const refused = yield* api("POST", "/v1/sessions", { key: user.key, body: {} })
        assert.strictEqual(refused.status, 402)
      }).pipe(Effect.scoped)
    )

    it.effect(
      "an account billing has not written to yet: no balance, a 1 USD alert threshold it can change",
      () =>
        Effect.gen(function* () {
          const { key } = yield* account
          const before = yield* summaryOf(key)
          assert.deepStrictEqual(
            [before.balance_micro_usd, before.low_balance_threshold_micro_usd, before.recent_entries],
            [0, 1_000_000, []]
          )
          const set = yield* api("POST", "/v1/billing/alerts", {
            key,
            body: { low_balance_threshold_usd: 2.5 }
          })
          assert.deepStrictEqual(
            [set.status, set.json],
            [200, { low_balance_threshold_micro_usd: 2_500_000 }]
          )
          const after = yield* summaryOf(key)
          assert.deepStrictEqual(
            [after.balance_micro_usd, after.low_balance_threshold_micro_usd],
            [0, 2_500_000]
          )
          assert.strictEqual((yield* api("POST", "/v1/sessions", { key, body: {} })).status, 402)
        })
    )

    it.effect("concurrent first credits of an account each land once, in turn", () =>
      Effect.gen(function* () {
        const { key, keyId } = yield* account
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ id: string }>`SELECT account_id AS id FROM api_keys WHERE id = ${keyId}`
        const billing = yield* Billing
        // An account without a balance row, as one made once sql/0020's triggers are gone (until then
        // every account gets its row with its insert): they write it once and take turns on it.
        yield* sql`DELETE FROM account_balances WHERE account_id = ${row!.id}`
        const results = yield* Effect.all(
          Array.from({ length: 8 }, (_, i) =>
            billing.credit({ accountId: row!.id, amount: BigInt(i + 1), kind: "grant", description: "test" })
          ),
          { concurrency: "unbounded" }
        )
        assert.isTrue(results.every((result) => result.credited))
        const summary = yield* summaryOf(key)
        assert.strictEqual(summary.balance_micro_usd, 36)
        assert.deepStrictEqual(
          summary.recent_entries
            .map((entry: any) => entry.balance_after_micro_usd)
            .sort((a: number, b: number) => a - b),
          [...new Set(results.map((result) => Number(result.balance)))].sort((a, b) => a - b)
        )
        assert.strictEqual(
          new Set(results.map((result) => result.balance)).size,
          8,
          "each saw the one before"
        )
      })
    )

    it.effect("the ledger is append-only", () =>
      Effect.gen(function* () {
        const { cookie } = yield* account
        const topup = yield* api("POST", "/v1/billing/topup", { cookie, body: { amount_usd: 10 } })
        yield* payLocally(cookie, topup.json.checkout_url)
        const sql = yield* SqlClient.SqlClient
        const message = (error: any) => String(error.reason?.cause?.message ?? error)
        const update = yield* Effect.flip(sql`UPDATE ledger_entries SET amount_micro_usd = 1`)
        assert.include(message(update), "append-only")
        const remove = yield* Effect.flip(sql`DELETE FROM ledger_entries`)
        assert.include(message(remove), "append-only")
      })
    )
  }
)

layer(TestService.layer({ browserPoolSize: 0, signupCreditUsd: 0 }), { excludeTestServices: true })(
  "a rolling deploy across sql/0020: nodes of both versions see one balance",
  (it) => {
    it.effect("money moved by a node of the previous version is seen by this one, and this one's by it", () =>
      Effect.gen(function* () {
        const { key, keyId } = yield* account
        const accountId = yield* accountIdOf(keyId)
        const billing = yield* Billing

        assert.strictEqual(yield* oldNode.credit(accountId, 3_000_000n), 3_000_000n)
        yield* oldNode.setLowBalanceThreshold(accountId, 2_000_000n)
        assert.strictEqual(yield* billing.balance(accountId), 3_000_000n)
        const seen = yield* summaryOf(key)
        assert.deepStrictEqual(
          [seen.balance_micro_usd, seen.low_balance_threshold_micro_usd],
          [3_000_000, 2_000_000]
        )

        const credited = yield* billing.credit({
          accountId,
          amount: 2_000_000n,
          kind: "grant",
          description: "new node"
        })
        assert.strictEqual(credited.balance, 5_000_000n, "on top of the old node's credit")
        const set = yield* api("POST", "/v1/billing/alerts", {
          key,
          body: { low_balance_threshold_usd: 0.5 }
        })
        assert.strictEqual(set.status, 200, set.text)
        assert.deepStrictEqual(yield* oldNode.money(accountId), {
          balance: "5000000",
          carry: "0",
          threshold: "500000"
        })
        assert.deepStrictEqual(
          (yield* summaryOf(key)).recent_entries
            .map((entry: any) => entry.balance_after_micro_usd)
            .sort((a: number, b: number) => a - b),
          [3_000_000, 5_000_000],
          "the ledger's running total, whichever node wrote the entry"
        )
      })
    )

    it.effect(
      "an account made by a node of the previous version keeps its money when this one credits it",
      () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const billing = yield* Billing
          const accountId = Crypto.randomUUID()
          // The previous version's identity inserts an account without naming its money.
          yield* sql`
          INSERT INTO accounts (id, name, kind, created_at)
          VALUES (${accountId}, ${`old-node-${accountId}`}, 'organization', ${new Date()})`
          assert.strictEqual(yield* oldNode.credit(accountId, 300_000n), 300_000n)

          const credited = yield* billing.credit({
            accountId,
            amount: 700_000n,
            kind: "grant",
            description: "new"
          })
          assert.strictEqual(credited.balance, 1_000_000n, "not a fresh row's zero")
          assert.deepStrictEqual(yield* oldNode.money(accountId), {
            balance: "1000000",
            carry: "0",
            threshold: "1000000"
          })
          assert.strictEqual(yield* oldNode.credit(accountId, 1n), 1_000_001n)
          assert.strictEqual(yield* billing.balance(accountId), 1_000_001n)
        })
    )

    it.effect("a credit on each version at the same moment: both land, in turn, without a deadlock", () =>
      Effect.gen(function* () {
        const { keyId } = yield* account
        const accountId = yield* accountIdOf(keyId)
        const sql = yield* SqlClient.SqlClient
        const billing = yield* Billing
        const locked = yield* Deferred.make<void>()
        // The old node holds the account row while this one's credit starts: were the new one to
        // lock its balance row first, each would wait for the other's row (Postgres would abort one).
        const old = yield* oldNode
          .credit(
            accountId,
            1_000_000n,
            Effect.andThen(Deferred.succeed(locked, undefined), sql`SELECT pg_sleep(0.5)`.pipe(Effect.orDie))
          )
          .pipe(Effect.forkChild)
        yield* Deferred.await(locked)
        const credited = yield* billing.credit({
          accountId,
          amount: 2_000_000n,
          kind: "grant",
          description: "new"
        })
        assert.strictEqual(yield* Fiber.join(old), 1_000_000n)
        assert.strictEqual(credited.balance, 3_000_000n, "after the old node's, seeing it")
        assert.strictEqual((yield* oldNode.money(accountId)).balance, "3000000")
        assert.strictEqual(yield* billing.balance(accountId), 3_000_000n)
      })
    )
  }
)

layer(TestService.layer({ browserPoolSize: 0, signupCreditUsd: 2.5 }), { excludeTestServices: true })(
  "signup credit",
  (it) => {
    it.effect("SIGNUP_CREDIT_USD is credited once to each new account, through the ledger", () =>
      Effect.gen(function* () {
        const { key } = yield* account
        const summary = yield* summaryOf(key)
        assert.strictEqual(summary.balance_micro_usd, 2_500_000)
        assert.deepStrictEqual(
          summary.recent_entries.map((entry: any) => [entry.kind, entry.amount_micro_usd]),
          [["signup_credit", 2_500_000]]
        )
      })
    )
  }
)

/** The fake Stripe, a process of its own that the service reaches over HTTP with the real SDK. */
class FakeStripe extends Context.Service<FakeStripe, { readonly url: string }>()("test/FakeStripe") {
  static readonly layer = Layer.effect(
    FakeStripe,
    Effect.acquireRelease(
      Effect.promise(
        () =>
          new Promise<{ url: string; kill: () => void }>((resolve, reject) => {
            const child = spawn(process.execPath, ["test/support/FakeStripe.ts"], {
              env: {
                ...process.env,
                FAKE_STRIPE_KEY: "sk_test_rbs",
                FAKE_STRIPE_WEBHOOK_SECRET: "whsec_rbs"
              },
              stdio: ["ignore", "pipe", "inherit"]
            })
            child.once("error", reject)
            child.stdout!.once("data", (chunk: Buffer) =>
              resolve({ url: chunk.toString().trim(), kill: () => child.kill("SIGTERM") })
            )
          })
      ),
      ({ kill }) => Effect.sync(kill)
    ).pipe(Effect.map(({ url }) => ({ url })))
  )
}

const StripeServiceLive = Layer.unwrap(
  FakeStripe.useSync((stripe) =>
    TestService.layer({
      browserPoolSize: 0,
      signupCreditUsd: 0,
      stripeSecretKey: "sk_test_rbs",
      stripeWebhookSecret: "whsec_rbs",
      stripeApiUrl: stripe.url
    })
  )
).pipe(Layer.provideMerge(FakeStripe.layer))

layer(StripeServiceLive, { excludeTestServices: true })("top-up with Stripe", (it) => {
  const control = (path: string) =>
    Effect.gen(function* () {
      const stripe = yield* FakeStripe
      const service = yield* TestService.TestService
      const separator = path.includes("?") ? "&" : "?"
      const webhook = encodeURIComponent(`${service.baseUrl}/v1/billing/stripe/webhook`)
      return yield* Effect.promise(() =>
        fetch(`${stripe.url}${path}${separator}webhook_url=${webhook}`, { method: "POST" }).then(
          (response) => response.json() as Promise<any>
        )
      )
    })

  it.effect("a Checkout Session through the SDK; the signed event credits once, a forged one nothing", () =>
    Effect.gen(function* () {
      const stripe = yield* FakeStripe
      const { key, cookie, email } = yield* account
      const topup = yield* api("POST", "/v1/billing/topup", { cookie, body: { amount_usd: 40 } })
      assert.strictEqual(topup.status, 200, topup.text)
      assert.match(topup.json.checkout_url, new RegExp(`^${stripe.url}/pay/cs_test_[0-9a-f]+$`))
      const sessionId = topup.json.checkout_url.split("/").pop()

      const seen = yield* Effect.promise(() =>
        fetch(`${stripe.url}/_control/requests`).then((response) => response.json() as Promise<any[]>)
      )
      const create = seen.find((entry) => entry.path === "/v1/checkout/sessions")
      assert.isTrue(create.authorized, "the SDK sent the secret key")
      assert.strictEqual(create.body["line_items[0][price_data][unit_amount]"], "4000")
      assert.strictEqual(create.body["line_items[0][price_data][currency]"], "usd")
      assert.strictEqual(create.body.customer_email, email)

      const forged = yield* control(`/_control/forge?session=${sessionId}`)
      assert.strictEqual(forged.delivery.status, 400)
      assert.strictEqual(JSON.parse(forged.delivery.body).error.code, "invalid_signature")
      assert.strictEqual((yield* summaryOf(key)).balance_micro_usd, 0)

      const paid = yield* control(`/_control/pay?session=${sessionId}`)
      assert.strictEqual(paid.delivery.status, 200, paid.delivery.body)
      assert.deepStrictEqual(JSON.parse(paid.delivery.body), { received: true })
      const replayed = yield* control(`/_control/replay?event=${paid.event}`)
      assert.strictEqual(replayed.delivery.status, 200)
      const other = yield* control("/_control/other-event")
      assert.strictEqual(other.delivery.status, 200, "events of no interest are acknowledged")

      const summary = yield* summaryOf(key)
      assert.strictEqual(summary.balance_micro_usd, 40_000_000, "credited once, though delivered twice")
      assert.deepStrictEqual(
        summary.recent_entries.map((entry: any) => [entry.kind, entry.amount_micro_usd]),
        [["topup", 40_000_000]]
      )
      const created = yield* api("POST", "/v1/sessions", { key, body: {} })
      assert.strictEqual(created.status, 201)
      yield* api("DELETE", `/v1/sessions/${created.json.id}`, { key })
    })
  )

  it.effect("a payment whose checkout lost its Stripe reference (a crash in between) is still credited", () =>
    Effect.gen(function* () {
      const { key, cookie } = yield* account
      const topup = yield* api("POST", "/v1/billing/topup", { cookie, body: { amount_usd: 15 } })
      const sessionId = topup.json.checkout_url.split("/").pop()
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE checkouts SET provider_ref = NULL WHERE provider_ref = ${sessionId}`
      const paid = yield* control(`/_control/pay?session=${sessionId}`)
      assert.strictEqual(paid.delivery.status, 200)
      assert.strictEqual((yield* summaryOf(key)).balance_micro_usd, 15_000_000)
      const replayed = yield* control(`/_control/replay?event=${paid.event}`)
      assert.strictEqual(replayed.delivery.status, 200)
      assert.strictEqual((yield* summaryOf(key)).balance_micro_usd, 15_000_000, "still once")
    })
  )
})
