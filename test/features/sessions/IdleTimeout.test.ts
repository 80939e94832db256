import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import puppeteer from "puppeteer-core"
import { Webhook } from "standardwebhooks"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"
import * as WebhookReceiver from "../../support/WebhookReceiver.ts"

/** Seconds from the session's `ready_at` (or `since`) to its `ended_at`. */
const secondsBetween = (from: string, to: string) => (Date.parse(to) - Date.parse(from)) / 1000

layer(
  TestService.layer({ browserPoolSize: 1, webhookAllowCidrs: "127.0.0.1/32", logLevel: "Error" as const }),
  { excludeTestServices: true }
)("idle timeout", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  const ended = (key: string, id: string) =>
    Effect.flatMap(TestService.TestService, (service) =>
      waitForSession(service.baseUrl, key, id, (session) => session.status !== "ready", 60_000)
    )

  it.effect(
    "a session nothing uses ends `idle_timeout` once its idle_timeout_seconds pass, and its webhook and audit say so; one a CDP client holds stays until the client leaves",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const receiver = yield* WebhookReceiver.serve
        const hook = yield* api("POST", "/v1/webhooks", {
          key: account.key,
          body: { url: receiver.url, events: ["session.closed"] }
        })
        const create = Effect.flatMap(
          api("POST", "/v1/sessions", { key: account.key, body: { idle_timeout_seconds: 10 } }),
          (created) => {
            assert.strictEqual(created.status, 201, created.text)
            return waitForSession(service.baseUrl, account.key, created.json.id, isReady)
          }
        )
        const [alone, held] = yield* Effect.all([create, create], { concurrency: 2 })
        assert.deepStrictEqual([alone.idle_timeout_seconds, held.idle_timeout_seconds], [10, 10])
        const browser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: held.cdp_url,
            headers: { Authorization: `Bearer ${account.key}` }
          })
        )

        const aloneEnded = yield* ended(account.key, alone.id)
        assert.deepStrictEqual([aloneEnded.status, aloneEnded.ended_reason], ["closed", "idle_timeout"])
        const idleFor = secondsBetween(alone.ready_at, aloneEnded.ended_at)
        assert.isAtLeast(idleFor, 10, "not before its timeout")
        assert.isBelow(idleFor, 15, "soon after it")

        // Past its timeout too, the session with a client is still open; without it, it times out.
        const stillHeld = yield* api("GET", `/v1/sessions/${held.id}`, { key: account.key })
        assert.strictEqual(stillHeld.json.status, "ready", "a connected client keeps it")
        yield* Effect.promise(() => browser.disconnect())
        const leftAt = new Date().toISOString()
        const heldEnded = yield* ended(account.key, held.id)
        assert.deepStrictEqual([heldEnded.status, heldEnded.ended_reason], ["closed", "idle_timeout"])
        assert.isAtLeast(secondsBetween(leftAt, heldEnded.ended_at), 9, "idle from when the client left")

        const events = (yield* receiver.waitFor(2)).map((each) =>
          new Webhook(hook.json.signing_secret).verify(each.body, each.headers as Record<string, string>)
        ) as Array<any>
        assert.sameMembers(
          events.map((event) => `${event.type} ${event.data.id} ${event.data.ended_reason}`),
          [`session.closed ${alone.id} idle_timeout`, `session.closed ${held.id} idle_timeout`]
        )
        const audit = yield* api("GET", "/v1/audit/events?action=session.idle_timeout", { key: account.key })
        assert.sameMembers(
          audit.json.data.map((event: any) => `${event.actor.type} ${event.target.id}`),
          [`system ${alone.id}`, `system ${held.id}`]
        )
      }).pipe(Effect.scoped),
    120_000
  )

  it.effect("idle_timeout_seconds is 10 to 86400, and none by default", () =>
    Effect.gen(function* () {
      const account = yield* signUp((yield* TestService.TestService).baseUrl)
      for (const idle_timeout_seconds of [9, 86_401, 10.5, "60"]) {
        const refused = yield* api("POST", "/v1/sessions", {
          key: account.key,
          body: { idle_timeout_seconds }
        })
        assert.strictEqual(refused.status, 400, refused.text)
        assert.deepStrictEqual(refused.json.error, {
          code: "invalid_field",
          message: "Invalid value for field: idle_timeout_seconds."
        })
      }
      const plain = yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
      const read = yield* api("GET", `/v1/sessions/${plain.json.id}`, { key: account.key })
      assert.isNull(read.json.idle_timeout_seconds)
      yield* api("DELETE", `/v1/sessions/${plain.json.id}`, { key: account.key })
    })
  )
})

layer(TestService.layer({ browserPoolSize: 0, sandbox: { poolSize: 0 }, logLevel: "Error" as const }), {
  excludeTestServices: true
})("idle timeout of a sandbox", (it) => {
  it.effect(
    "a command running in the background keeps a sandbox in use; once it exits, the sandbox times out",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const created = yield* request(service.baseUrl, "POST", "/v1/sessions", {
          key: account.key,
          body: { session_type: "sandbox", idle_timeout_seconds: 10 }
        })
        assert.strictEqual(created.status, 201, created.text)
        const session = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
        // Before the request: the command cannot start earlier, however long its answer takes to come
        // (taken after the answer, a busy machine's slow answer moved the bound past the command's start).
        const startedAt = Date.now()
        const started = yield* request(service.baseUrl, "POST", `/v1/sessions/${session.id}/exec`, {
          key: account.key,
          body: { command: "sleep 14", background: true }
        })
        assert.include([200, 201, 202], started.status, started.text)
        const closed = yield* waitForSession(
          service.baseUrl,
          account.key,
          session.id,
          (s) => s.status !== "ready",
          60_000
        )
        assert.strictEqual(closed.ended_reason, "idle_timeout")
        // Idle only from the command's exit (14 s after it started), then 10 s more: 24 s at the least
        // (1 s of slack for the two clocks' reads).
        assert.isAtLeast((Date.parse(closed.ended_at) - startedAt) / 1000, 23)
      }),
    120_000
  )
})
