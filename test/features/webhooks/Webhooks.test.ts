import { assert, layer } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import puppeteer from "puppeteer-core"
import { Webhook } from "standardwebhooks"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"
import * as WebhookReceiver from "../../support/WebhookReceiver.ts"

const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const withSql = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.flatMap(TestService.TestService, (service) =>
    effect.pipe(
      Effect.provide(PgClient.layer({ url: Redacted.make(service.config.databaseUrl), maxConnections: 1 }))
    )
  )

/** Polls a delivery until `done` holds (20 s at most). */
const waitForDelivery = (key: string, id: string, done: (delivery: any) => boolean) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 20_000
    while (true) {
      const found = yield* api("GET", `/v1/webhooks/deliveries/${id}`, { key })
      if (done(found.json)) return found.json
      if (Date.now() > deadline) return yield* Effect.die(new Error(`delivery ${id}: ${found.text}`))
      yield* Effect.sleep("100 millis")
    }
  })

layer(TestService.layer({ browserPoolSize: 0, webhookAllowCidrs: "127.0.0.1/32" }), {
  excludeTestServices: true
})("webhooks", (it) => {
  it.effect(
    "are created with their secret once, listed with a preview, refused for bad URLs and events",
    () =>
      Effect.gen(function* () {
        const { key } = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const receiver = yield* WebhookReceiver.serve
        const created = yield* api("POST", "/v1/webhooks", {
          key,
          body: { url: receiver.url, events: ["session.ready", "session.closed"], description: "ops" }
        })
        assert.strictEqual(created.status, 201, created.text)
        assert.match(created.json.signing_secret, /^whsec_/)
        assert.strictEqual(
          created.json.signing_secret_preview,
          `${created.json.signing_secret.slice(0, 10)}...`
        )
        const listed = yield* api("GET", "/v1/webhooks", { key })
        assert.include(listed.json.supported_events, "session.ready")
        assert.include(listed.json.supported_events, "balance.low")
        assert.lengthOf(listed.json.webhooks, 1)
        assert.notProperty(listed.json.webhooks[0], "signing_secret")
        assert.notInclude(listed.text, created.json.signing_secret)
        // At rest the secret is ciphertext.
        const [stored] = yield* withSql(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql<{
                secret_ciphertext: string
              }>`SELECT secret_ciphertext FROM webhooks WHERE id = ${created.json.id}`
          )
        )
        assert.match(stored!.secret_ciphertext, /^v1:/)
        assert.notInclude(stored!.secret_ciphertext, created.json.signing_secret.slice(6))
        assert.deepStrictEqual(listed.json.webhooks[0].events, ["session.ready", "session.closed"])

        const refused = (body: object) =>
          Effect.map(api("POST", "/v1/webhooks", { key, body }), (answer) => [
            answer.status,
            answer.json.error
          ])
        const field = (name: string) => ({
          code: "invalid_field",
          message: `Invalid value for field: ${name}.`
        })
        assert.deepStrictEqual(yield* refused({ url: receiver.url, events: ["session.exploded"] }), [
          400,
          field("events")
        ])
        assert.deepStrictEqual(yield* refused({ url: receiver.url, events: [] }), [400, field("events")])
        for (const url of [
          "ftp://127.0.0.1/x",
          "not a url",
          // Plain http outside WEBHOOK_ALLOW_CIDRS, and refused destinations (private, link-local metadata).
          "http://127.0.0.2:9/hook",
          "https://10.1.2.3/hook",
          "https://169.254.169.254/latest/meta-data",
          // The service's own port, though on an allowed address.
          `${(yield* TestService.TestService).baseUrl}/v1/sessions`
        ])
          assert.deepStrictEqual(yield* refused({ url, events: ["session.ready"] }), [400, field("url")], url)

        const removed = yield* api("DELETE", `/v1/webhooks/${created.json.id}`, { key })
        assert.strictEqual(removed.status, 204)
        const again = yield* api("DELETE", `/v1/webhooks/${created.json.id}`, { key })
        assert.deepStrictEqual([again.status, again.json.error.code], [404, "webhook_not_found"])
        const audit = yield* api("GET", "/v1/audit/events", { key })
        const actions = audit.json.data.map((event: any) => event.action)
        assert.includeMembers(actions, ["webhook.created", "webhook.deleted"])
      })
  )

  it.effect(
    "deliver a session's lifecycle signed per Standard Webhooks, only to the account's own endpoints",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const [mine, other] = [yield* signUp(service.baseUrl), yield* signUp(service.baseUrl)]
        const receiver = yield* WebhookReceiver.serve
        const otherReceiver = yield* WebhookReceiver.serve
        const hook = yield* api("POST", "/v1/webhooks", {
          key: mine.key,
          body: { url: receiver.url, events: ["session.created", "session.ready", "session.closed"] }
        })
        yield* api("POST", "/v1/webhooks", {
          key: other.key,
          body: { url: otherReceiver.url, events: ["session.created", "session.ready", "session.closed"] }
        })
        const accountId = (yield* api("GET", "/v1/accounts/current", { key: mine.key })).json.account.id
        const created = yield* api("POST", "/v1/sessions", {
          key: mine.key,
          body: { metadata: { job: "nightly" } }
        })
        yield* waitForSession(service.baseUrl, mine.key, created.json.id, isReady)
        yield* api("DELETE", `/v1/sessions/${created.json.id}`, { key: mine.key })
        const [first, second, third] = yield* receiver.waitFor(3)
        const verifier = new Webhook(hook.json.signing_secret)
        const events = [first!, second!, third!].map((each) =>
          verifier.verify(each.body, each.headers as Record<string, string>)
        ) as Array<any>
        assert.deepStrictEqual(events.map((event) => event.type).sort(), [
          "session.closed",
          "session.created",
          "session.ready"
        ])
        for (const [i, event] of events.entries()) {
          assert.strictEqual(event.account_id, accountId)
          assert.strictEqual(event.data.id, created.json.id)
          assert.deepStrictEqual(event.data.metadata, { job: "nightly" }, "each event carries the labels")
          assert.strictEqual([first, second, third][i]!.headers["webhook-id"], event.id)
        }
        const closed = events.find((event) => event.type === "session.closed")
        assert.deepStrictEqual([closed.data.status, closed.data.ended_reason], ["closed", "client_delete"])
        // The ready and closed events are written by the statement of their change, in SQL: the same
        // data as the session shows, to the millisecond, and the same fields as session.created's.
        const shown = (yield* api("GET", `/v1/sessions/${created.json.id}`, { key: mine.key })).json
        const createdEvent = events.find((event) => event.type === "session.created")
        const fields = Object.keys(createdEvent.data).sort()
        // The session's view names its region `proxy_region`, set once ready; the events' is the create's.
        const as = (data: any) => ({
          ...Object.fromEntries(fields.map((field) => [field, data[field]])),
          region: createdEvent.data.region
        })
        assert.deepStrictEqual(Object.keys(closed.data).sort(), fields)
        assert.deepStrictEqual(closed.data, as(shown))
        const ready = events.find((event) => event.type === "session.ready")
        assert.deepStrictEqual(Object.keys(ready.data).sort(), fields)
        assert.deepStrictEqual(ready.data, {
          ...as(shown),
          status: "ready",
          ended_at: null,
          ended_reason: null,
          bytes_up: 0,
          bytes_down: 0
        })
        assert.match(ready.data.ready_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
        assert.lengthOf(otherReceiver.received, 0, "another account's endpoint hears nothing of it")

        const list = yield* api("GET", `/v1/webhooks/deliveries?webhook_id=${hook.json.id}`, {
          key: mine.key
        })
        assert.lengthOf(list.json.data, 3)
        // Pages of two: the cursor leads to the third, and the last page says so.
        const page1 = yield* api("GET", `/v1/webhooks/deliveries?webhook_id=${hook.json.id}&limit=2`, {
          key: mine.key
        })
        assert.deepStrictEqual([page1.json.data.length, page1.json.has_more], [2, true])
        const rest = yield* api(
          "GET",
          `/v1/webhooks/deliveries?webhook_id=${hook.json.id}&limit=2&cursor=${page1.json.next_cursor}`,
          { key: mine.key }
        )
        assert.deepStrictEqual(
          [rest.json.data.length, rest.json.has_more, rest.json.next_cursor],
          [1, false, null]
        )
        assert.deepStrictEqual(
          [...page1.json.data, ...rest.json.data].map((d: any) => d.id),
          list.json.data.map((d: any) => d.id)
        )
        const bad = yield* api("GET", "/v1/webhooks/deliveries?cursor=nonsense", { key: mine.key })
        assert.deepStrictEqual([bad.status, bad.json.error.code], [400, "invalid_field"])
        const succeeded = yield* waitForDelivery(
          mine.key,
          list.json.data[0].id,
          (d) => d.state === "succeeded"
        )
        assert.strictEqual(succeeded.attempt_log[0].status_code, 200)
        assert.strictEqual(succeeded.attempt_log[0].response_excerpt, "thanks")
        const foreign = yield* api("GET", `/v1/webhooks/deliveries/${list.json.data[0].id}`, {
          key: other.key
        })
        assert.strictEqual(foreign.status, 404)
      })
  )

  it.effect("deliver key, member, top-up and balance events from the transactions that make them", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const friend = yield* signUp(service.baseUrl)
      const receiver = yield* WebhookReceiver.serve
      const accountId = (yield* api("GET", "/v1/accounts/current", { key: account.key })).json.account.id
      yield* api("POST", "/v1/webhooks", {
        key: account.key,
        body: {
          url: receiver.url,
          events: [
            "key.created",
            "key.rotated",
            "key.revoked",
            "billing.topup_succeeded",
            "balance.low",
            "balance.depleted"
          ]
        }
      })
      const key = yield* api("POST", "/v1/keys", { cookie: account.cookie, body: { name: "ci" } })
      const rotated = yield* api("POST", `/v1/keys/${key.json.id}/rotate`, {
        cookie: account.cookie,
        body: {}
      })
      yield* api("DELETE", `/v1/keys/${rotated.json.id}`, { cookie: account.cookie })
      const checkout = yield* api("POST", "/v1/billing/checkout", {
        cookie: account.cookie,
        body: { amount_usd: 10 }
      })
      const page = yield* api("GET", new URL(checkout.json.checkout_url).pathname, { cookie: account.cookie })
      const action = /<form method="post" action="([^"]+)"/.exec(page.text)![1]!
      yield* api("POST", action, {
        cookie: account.cookie,
        rawBody: "",
        contentType: "application/x-www-form-urlencoded"
      })

      // A session with traffic: its charge crosses the threshold (set to the balance), then zero.
      const browse = (balance?: number) =>
        Effect.gen(function* () {
          if (balance === undefined) {
            // The threshold at the balance itself: the next charge crosses it.
            const summary = (yield* api("GET", "/v1/billing/summary", { key: account.key })).json
            const set = yield* api("POST", "/v1/billing/alerts", {
              key: account.key,
              body: { low_balance_threshold_usd: summary.balance_micro_usd / 1_000_000 }
            })
            assert.strictEqual(set.json.low_balance_threshold_micro_usd, summary.balance_micro_usd)
            const after = (yield* api("GET", "/v1/billing/summary", { key: account.key })).json
            assert.strictEqual(after.low_balance_threshold_micro_usd, summary.balance_micro_usd)
          } else {
            // A nearly spent balance (written directly: reaching it for real takes gigabytes).
            yield* withSql(
              Effect.flatMap(
                SqlClient.SqlClient,
                (sql) =>
                  sql`UPDATE account_balances SET balance_micro_usd = ${balance} WHERE account_id = ${accountId}`
              )
            )
          }
          const session = yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
          yield* waitForSession(service.baseUrl, account.key, session.json.id, isReady)
          const local = yield* LocalPage.serve
          const browser = yield* Effect.promise(() =>
            puppeteer.connect({
              browserWSEndpoint: session.json.cdp_url,
              headers: { Authorization: `Bearer ${account.key}` }
            })
          )
          const tab = yield* Effect.promise(() => browser.newPage())
          yield* Effect.promise(() => tab.goto(`${local}?title=${"x".repeat(4000)}`))
          yield* Effect.promise(() => browser.disconnect())
          yield* api("DELETE", `/v1/sessions/${session.json.id}`, { key: account.key })
        })
      yield* browse()
      yield* browse(1)

      const events = (yield* receiver.waitFor(6)).map((each) => JSON.parse(each.body))
      assert.deepStrictEqual(events.map((event) => event.type).sort(), [
        "balance.depleted",
        "balance.low",
        "billing.topup_succeeded",
        "key.created",
        "key.revoked",
        "key.rotated"
      ])
      const byType = Object.fromEntries(events.map((event) => [event.type, event.data]))
      assert.strictEqual(byType["key.created"].id, key.json.id)
      assert.notInclude(JSON.stringify(events), key.json.secret, "no secret in an event")
      assert.deepStrictEqual(
        [byType["key.rotated"].id, byType["key.rotated"].new_key_id],
        [key.json.id, rotated.json.id]
      )
      assert.strictEqual(byType["key.revoked"].id, rotated.json.id)
      assert.strictEqual(byType["billing.topup_succeeded"].amount_micro_usd, 10_000_000)
      assert.isBelow(byType["balance.low"].balance_micro_usd, byType["balance.low"].threshold_micro_usd)
      assert.isAtMost(byType["balance.depleted"].balance_micro_usd, 0)

      // Members, in an organization with its own webhook.
      const org = yield* api("POST", "/v1/accounts/organizations", {
        cookie: account.cookie,
        body: { name: `hooks-${account.userId.slice(0, 8)}` }
      })
      const inOrg = { cookie: account.cookie, headers: { "x-service-account": org.json.account.id } }
      yield* api("POST", "/v1/webhooks", {
        ...inOrg,
        body: { url: receiver.url, events: ["member.added", "member.removed", "key.revoked"] }
      })
      yield* api("POST", "/v1/accounts/current/members", { ...inOrg, body: { email: friend.email } })
      // The member's key in the organization ends with their membership.
      const friendKey = yield* api("POST", "/v1/keys", {
        cookie: friend.cookie,
        headers: { "x-service-account": org.json.account.id },
        body: { name: "friend's" }
      })
      assert.strictEqual(friendKey.status, 201, friendKey.text)
      yield* api("DELETE", `/v1/accounts/current/members/${friend.userId}`, inOrg)
      const members = (yield* receiver.waitFor(9)).slice(6).map((each) => JSON.parse(each.body))
      assert.deepStrictEqual(
        members.map((event) => [event.type, event.account_id, event.data.user_id ?? event.data.id]).sort(),
        [
          ["key.revoked", org.json.account.id, friendKey.json.id],
          ["member.added", org.json.account.id, friend.userId],
          ["member.removed", org.json.account.id, friend.userId]
        ]
      )
    })
  )

  it.effect("sign with the old and the new secret for a day after a rotation", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const receiver = yield* WebhookReceiver.serve
      const hook = yield* api("POST", "/v1/webhooks", {
        key: account.key,
        body: { url: receiver.url, events: ["key.created"] }
      })
      const rotated = yield* api("POST", `/v1/webhooks/${hook.json.id}/rotate-secret`, { key: account.key })
      assert.strictEqual(rotated.status, 200, rotated.text)
      assert.notStrictEqual(rotated.json.signing_secret, hook.json.signing_secret)
      assert.strictEqual(
        rotated.json.signing_secret_preview,
        `${rotated.json.signing_secret.slice(0, 10)}...`
      )
      yield* api("POST", "/v1/keys", { cookie: account.cookie, body: { name: "after rotation" } })
      const [delivered] = yield* receiver.waitFor(1)
      assert.lengthOf(String(delivered!.headers["webhook-signature"]).split(" "), 2)
      for (const secret of [hook.json.signing_secret, rotated.json.signing_secret])
        assert.isOk(new Webhook(secret).verify(delivered!.body, delivered!.headers as Record<string, string>))
      const actions = (yield* api("GET", "/v1/audit/events", { key: account.key })).json.data.map(
        (event: any) => event.action
      )
      assert.include(actions, "webhook.secret_rotated")
    })
  )

  it.effect("retry a failing receiver after 5 s until it recovers; replay and discard on request", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const receiver = yield* WebhookReceiver.serve
      const hook = yield* api("POST", "/v1/webhooks", {
        key: account.key,
        body: { url: receiver.url, events: ["session.created"] }
      })
      receiver.answer(500)
      const created = yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
      const [failed, recovered] = yield* receiver.waitFor(2)
      assert.strictEqual(
        failed!.headers["webhook-id"],
        recovered!.headers["webhook-id"],
        "one id, every attempt"
      )
      const gap = recovered!.at - failed!.at
      assert.isTrue(gap >= 4_400 && gap < 8_000, `retried after ${gap} ms`)
      const [delivery] = (yield* api("GET", `/v1/webhooks/deliveries?webhook_id=${hook.json.id}`, {
        key: account.key
      })).json.data
      const detail = yield* waitForDelivery(account.key, delivery.id, (d) => d.state === "succeeded")
      assert.deepStrictEqual(
        detail.attempt_log.map((a: any) => [a.number, a.status_code]),
        [
          [1, 500],
          [2, 200]
        ]
      )
      assert.strictEqual(detail.payload.data.id, created.json.id)

      // Replay: a new series, the same event id.
      const replayed = yield* api("POST", `/v1/webhooks/deliveries/${delivery.id}/replay`, {
        key: account.key
      })
      assert.strictEqual(replayed.status, 200, replayed.text)
      const [, , third] = yield* receiver.waitFor(3)
      assert.strictEqual(third!.headers["webhook-id"], failed!.headers["webhook-id"])
      const afterReplay = yield* waitForDelivery(account.key, delivery.id, (d) => d.state === "succeeded")
      assert.deepStrictEqual(
        afterReplay.attempt_log.map((a: any) => [a.series, a.number]),
        [
          [1, 1],
          [1, 2],
          [2, 1]
        ]
      )

      // Discard: a failing delivery stops being retried.
      receiver.answer(503, 503)
      yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
      yield* receiver.waitFor(4)
      // Recorded as failed, due again in 5 s.
      let pending: Array<any> = []
      for (let tries = 0; pending.length === 0 && tries < 100; tries++) {
        pending = (yield* api("GET", `/v1/webhooks/deliveries?state=pending&webhook_id=${hook.json.id}`, {
          key: account.key
        })).json.data
        if (pending.length === 0) yield* Effect.sleep("50 millis")
      }
      assert.lengthOf(pending, 1)
      const discarded = yield* api("POST", `/v1/webhooks/deliveries/${pending[0].id}/discard`, {
        key: account.key
      })
      assert.strictEqual(discarded.json.state, "discarded")
      const twice = yield* api("POST", `/v1/webhooks/deliveries/${pending[0].id}/discard`, {
        key: account.key
      })
      assert.deepStrictEqual([twice.status, twice.json.error.code], [409, "delivery_conflict"])
      yield* Effect.sleep("6 seconds")
      assert.lengthOf(receiver.received, 4, "no retry after the discard")
      const actions = (yield* api("GET", "/v1/audit/events", { key: account.key })).json.data.map(
        (event: any) => event.action
      )
      assert.includeMembers(actions, ["webhook_delivery.replayed", "webhook_delivery.discarded"])
    })
  )

  it.effect("a 410 disables the endpoint; a destination refused at delivery time is not contacted", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const receiver = yield* WebhookReceiver.serve
      const hook = yield* api("POST", "/v1/webhooks", {
        key: account.key,
        body: { url: receiver.url, events: ["session.created"] }
      })
      receiver.answer(410)
      yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
      yield* receiver.waitFor(1)
      const [delivery] = (yield* api("GET", `/v1/webhooks/deliveries?webhook_id=${hook.json.id}`, {
        key: account.key
      })).json.data
      const gone = yield* waitForDelivery(account.key, delivery.id, (d) => d.state === "failed")
      assert.strictEqual(gone.last_status, 410)
      const listed = (yield* api("GET", "/v1/webhooks", { key: account.key })).json.webhooks
      assert.isNotNull(listed[0].disabled_at)
      yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
      yield* Effect.sleep("1500 millis")
      assert.lengthOf(receiver.received, 1, "a disabled endpoint gets nothing more")

      // The URL's address changed since it was checked (DNS): the attempt is refused, not sent.
      const second = yield* api("POST", "/v1/webhooks", {
        key: account.key,
        body: { url: receiver.url, events: ["session.created"] }
      })
      yield* withSql(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql`UPDATE webhooks SET url = ${`http://10.9.8.7:${new URL(receiver.url).port}/hook`} WHERE id = ${second.json.id}`
        )
      )
      yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
      const [refused] = (yield* api("GET", `/v1/webhooks/deliveries?webhook_id=${second.json.id}`, {
        key: account.key
      })).json.data
      const attempted = yield* waitForDelivery(
        account.key,
        refused.id,
        (d) => d.attempt_log.length > 0 && d.attempt_log[0].finished_at !== null
      )
      assert.isNull(attempted.attempt_log[0].status_code)
      assert.match(attempted.attempt_log[0].error, /refused destination: 10\.9\.8\.7 \(private\)/)
      assert.strictEqual(attempted.state, "pending", "retried on the schedule")
      assert.lengthOf(receiver.received, 1)
    })
  )
})

layer(
  TestService.layer({
    browserPoolSize: 0,
    webhookAllowCidrs: "127.0.0.1/32",
    limits: { webhookMutationsPerMinute: 3 }
  }),
  { excludeTestServices: true }
)("webhook mutations", (it) => {
  it.effect("are rate limited per account, with the X-RateLimit headers; reads are not", () =>
    Effect.gen(function* () {
      const { key } = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
      const receiver = yield* WebhookReceiver.serve
      const statuses: Array<number> = []
      let last: any
      for (let i = 0; i < 4; i++) {
        last = yield* api("POST", "/v1/webhooks", {
          key,
          body: { url: receiver.url, events: ["session.ready"] }
        })
        statuses.push(last.status)
        assert.strictEqual(last.headers.get("x-ratelimit-limit"), "3")
      }
      assert.deepStrictEqual(statuses, [201, 201, 201, 429])
      assert.strictEqual(last.json.error.code, "rate_limited")
      assert.isNotNull(last.headers.get("retry-after"))
      const read = yield* api("GET", "/v1/webhooks", { key })
      assert.strictEqual(read.status, 200)
      assert.isNull(read.headers.get("x-ratelimit-limit"))
      const metrics = yield* api("GET", "/metrics")
      // Read at the scrape: the queue of every event type is reported, empty here.
      assert.match(metrics.text, /rbs_webhook_deliveries\{[^}]*event_type="session\.ready"[^}]*\} 0\n/)
      assert.match(metrics.text, /rbs_webhook_deliveries\{[^}]*state="pending"[^}]*\} 0\n/)
      // Every event type's `data` is in the OpenAPI document.
      const openapi = (yield* api("GET", "/api-docs/openapi.json")).text
      for (const field of [
        "threshold_micro_usd",
        "new_key_id",
        "amount_micro_usd",
        "ended_reason",
        '"member.removed"'
      ])
        assert.include(openapi, field)
    })
  )
})
