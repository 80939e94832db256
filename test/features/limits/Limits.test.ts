import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { findProcessesUsing } from "../../../src/runtimes/browser/Chromium.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const account = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

const rateHeaders = (headers: Headers) => ({
  limit: headers.get("x-ratelimit-limit"),
  remaining: headers.get("x-ratelimit-remaining"),
  scope: headers.get("x-ratelimit-scope")
})

const resetSeconds = (headers: Headers) => Number(headers.get("x-ratelimit-reset"))

layer(
  TestService.layer({
    browserPoolSize: 1,
    limits: { sessionCreatesPerMinute: 3, screenshotsPerMinute: 2, previewTokensPerMinute: 2 }
  }),
  { excludeTestServices: true }
)("rate limits", (it) => {
  it.effect("session creations per account: headers on every answer, 429 rate_limited past the budget", () =>
    Effect.gen(function* () {
      const { key } = yield* account
      const other = yield* account
      const ids: Array<string> = []
      for (let i = 0; i < 3; i++) {
        const created = yield* api("POST", "/v1/sessions", { key, body: {} })
        assert.strictEqual(created.status, 201, created.text)
        assert.deepStrictEqual(rateHeaders(created.headers), {
          limit: "3",
          remaining: String(2 - i),
          scope: "account"
        })
        const reset = resetSeconds(created.headers)
        assert.isTrue(reset > 0 && reset <= 60, `reset ${reset}`)
        assert.isNull(created.headers.get("retry-after"), "a success has no Retry-After")
        ids.push(created.json.id)
      }
      const refused = yield* api("POST", "/v1/sessions", { key, body: {} })
      assert.strictEqual(refused.status, 429)
      assert.deepStrictEqual(refused.json, { error: { code: "rate_limited", message: "Too many requests." } })
      assert.deepStrictEqual(rateHeaders(refused.headers), { limit: "3", remaining: "0", scope: "account" })
      const retryAfter = Number(refused.headers.get("retry-after"))
      assert.isTrue(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`)
      assert.isTrue(resetSeconds(refused.headers) >= 1)

      // Another account has its own budget, and deleting never counts against one.
      assert.strictEqual((yield* api("POST", "/v1/sessions", { key: other.key, body: {} })).status, 201)
      for (const id of ids) {
        const deleted = yield* api("DELETE", `/v1/sessions/${id}`, { key })
        assert.strictEqual(deleted.status, 204)
        assert.isNull(deleted.headers.get("x-ratelimit-limit"), "DELETE is not limited")
      }
      const list = yield* api("GET", "/v1/sessions", { key })
      assert.strictEqual(list.json.data.length, 3, "the refused create wrote no row")

      const metrics = yield* api("GET", "/metrics")
      assert.match(metrics.text, /rbs_limit_rejections_total\{limit="session_create"\} [1-9]/)
    })
  )

  it.effect("screenshots and preview tokens per session, each session with its own budget", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const { key } = yield* account
      const first = yield* api("POST", "/v1/sessions", { key, body: {} })
      const second = yield* api("POST", "/v1/sessions", { key, body: {} })
      for (const id of [first.json.id, second.json.id])
        yield* waitForSession(service.baseUrl, key, id, isReady)

      for (const [suffix, body] of [
        ["/screenshot", undefined],
        ["/preview-token", {}]
      ] as const) {
        const path = `/v1/sessions/${first.json.id}${suffix}`
        for (let i = 0; i < 2; i++) {
          const ok = yield* api("POST", path, { key, ...(body === undefined ? {} : { body }) })
          assert.strictEqual(ok.status, 200, `${suffix} ${ok.text}`)
          assert.deepStrictEqual(rateHeaders(ok.headers), {
            limit: "2",
            remaining: String(1 - i),
            scope: "account"
          })
        }
        const refused = yield* api("POST", path, { key, ...(body === undefined ? {} : { body }) })
        assert.strictEqual(refused.status, 429, suffix)
        assert.strictEqual(refused.json.error.code, "rate_limited")
        assert.isTrue(Number(refused.headers.get("retry-after")) >= 1)
        const elsewhere = yield* api("POST", `/v1/sessions/${second.json.id}${suffix}`, {
          key,
          ...(body === undefined ? {} : { body })
        })
        assert.strictEqual(elsewhere.status, 200, `${suffix} on another session`)
      }
      const metrics = yield* api("GET", "/metrics")
      assert.match(metrics.text, /rbs_limit_rejections_total\{limit="screenshot"\} [1-9]/)
      assert.match(metrics.text, /rbs_limit_rejections_total\{limit="preview_token"\} [1-9]/)
      for (const id of [first.json.id, second.json.id]) yield* api("DELETE", `/v1/sessions/${id}`, { key })
    })
  )

  it.effect("routes outside the limits carry no rate-limit headers", () =>
    Effect.gen(function* () {
      const { key } = yield* account
      const list = yield* api("GET", "/v1/sessions", { key })
      assert.strictEqual(list.status, 200)
      assert.isNull(list.headers.get("x-ratelimit-limit"))
      const health = yield* api("GET", "/healthz")
      assert.isNull(health.headers.get("x-ratelimit-limit"))
    })
  )
})

describe("concurrency cap", () => {
  // The node's capacity is the account cap: one account fills the node.
  layer(
    TestService.layer({
      browserPoolSize: 0,
      maxBrowsers: 10,
      sandbox: { maxSandboxes: 1 },
      limits: { sessionCreatesPerMinute: 1000 }
    }),
    { excludeTestServices: true }
  )("with the default cap of 10", (it) => {
    it.effect(
      "30 parallel creates on an empty account: exactly 10 get 201, 20 get 429, 10 browsers run; the full node refuses another account with 503",
      () =>
        Effect.gen(function* () {
          const service = yield* TestService.TestService
          const { key } = yield* account
          const answers = yield* Effect.forEach(
            Array.from({ length: 30 }),
            () => api("POST", "/v1/sessions", { key, body: {} }),
            { concurrency: "unbounded" }
          )
          const created = answers.filter((answer) => answer.status === 201)
          const refused = answers.filter((answer) => answer.status === 429)
          assert.strictEqual(created.length, 10)
          assert.strictEqual(refused.length, 20)
          for (const answer of refused) {
            assert.deepStrictEqual(answer.json, {
              error: { code: "concurrency_limit", message: "Concurrency limit reached." }
            })
            assert.strictEqual(answer.headers.get("x-ratelimit-limit"), "10")
            assert.strictEqual(answer.headers.get("x-ratelimit-remaining"), "0")
            assert.strictEqual(answer.headers.get("x-ratelimit-scope"), "account")
            assert.strictEqual(answer.headers.get("retry-after"), "5")
            const reset = Number(answer.headers.get("x-ratelimit-reset"))
            assert.isTrue(reset > 0 && reset <= 1800, `reset ${reset}`)
          }
          const ids = created.map((answer) => answer.json.id as string)
          for (const id of ids) yield* waitForSession(service.baseUrl, key, id, isReady, 60_000)
          const profiles = TestService.profilesDirOf(service.config.dataDir)
          const browsers = yield* Effect.promise(() => findProcessesUsing(profiles))
          // Each Chromium is a process group; count the group leaders, one per browser.
          const leaders = browsers.filter((pid) => isGroupLeader(pid))
          assert.strictEqual(leaders.length, 10)

          // The node runs its MAX_BROWSERS: another account is refused at once, and spends nothing.
          const other = yield* account
          const full = yield* api("POST", "/v1/sessions", { key: other.key, body: {} })
          assert.strictEqual(full.status, 503, full.text)
          assert.deepStrictEqual(full.json, {
            error: { code: "capacity_exhausted", message: "No browser capacity is free; retry later." }
          })
          assert.strictEqual(full.headers.get("retry-after"), "2")
          assert.strictEqual(full.headers.get("x-ratelimit-remaining"), "1000")
          // Places are per kind: with every browser place taken, a sandbox has its own (one here).
          const sandbox = yield* api("POST", "/v1/sessions", {
            key: other.key,
            body: { session_type: "sandbox" }
          })
          assert.strictEqual(sandbox.status, 201, sandbox.text)
          const noSandbox = yield* api("POST", "/v1/sessions", {
            key: other.key,
            body: { session_type: "sandbox" }
          })
          assert.strictEqual(noSandbox.status, 503, noSandbox.text)
          assert.strictEqual(noSandbox.json.error.message, "No sandbox capacity is free; retry later.")
          assert.strictEqual(
            (yield* api("DELETE", `/v1/sessions/${sandbox.json.id}`, { key: other.key })).status,
            204
          )

          // At the cap a DELETE still works, and frees a slot.
          assert.strictEqual((yield* api("DELETE", `/v1/sessions/${ids[0]}`, { key })).status, 204)
          const again = yield* api("POST", "/v1/sessions", { key, body: {} })
          assert.strictEqual(again.status, 201, again.text)
          const over = yield* api("POST", "/v1/sessions", { key, body: {} })
          assert.strictEqual(over.status, 429)
          for (const id of [...ids.slice(1), again.json.id]) {
            assert.strictEqual((yield* api("DELETE", `/v1/sessions/${id}`, { key })).status, 204)
          }
        })
    )
  })
})

const isGroupLeader = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return Number(fields[2]) === pid
  } catch {
    return false
  }
}
