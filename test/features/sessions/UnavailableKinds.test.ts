import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

// A node that cannot run a kind of session says so, and why: a create of that kind is refused with
// 503 `session_type_unavailable` (no `Retry-After`: waiting would not help), `/readyz` is 200 and
// names the kind with its reason, and the kinds it does run work as before.

const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const account = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

const NO_RUNC = "/nonexistent/runc"
const RUNC_REASON = `runc was not found at ${NO_RUNC}: install it (Debian: apt-get install runc) or set RUNC_PATH`

describe("a node whose machine cannot run sandboxes", () => {
  layer(TestService.layer({ browserPoolSize: 0, sandbox: { runcPath: NO_RUNC } }), {
    excludeTestServices: true
  })("runc missing", (it) => {
    it.effect(
      "POST /v1/sessions and POST /v1/exec of a sandbox: 503 session_type_unavailable with the reason, no Retry-After, no budget spent",
      () =>
        Effect.gen(function* () {
          const { key } = yield* account
          const message = `This service runs no sandbox sessions: ${RUNC_REASON}.`
          const created = yield* api("POST", "/v1/sessions", { key, body: { session_type: "sandbox" } })
          assert.strictEqual(created.status, 503, created.text)
          assert.deepStrictEqual(created.json, { error: { code: "session_type_unavailable", message } })
          assert.isNull(created.headers.get("retry-after"))
          assert.strictEqual(created.headers.get("x-ratelimit-remaining"), "20", "the refusal spends nothing")

          const ran = yield* api("POST", "/v1/exec", { key, body: { command: ["true"] } })
          assert.strictEqual(ran.status, 503, ran.text)
          assert.deepStrictEqual(ran.json, { error: { code: "session_type_unavailable", message } })
          assert.isNull(ran.headers.get("retry-after"))

          const listed = yield* api("GET", "/v1/sessions", { key })
          assert.deepStrictEqual(listed.json.data, [], "no session was recorded")
        })
    )

    it.effect("/readyz is 200 and says which kinds this node runs, and why not sandboxes", () =>
      Effect.gen(function* () {
        const ready = yield* api("GET", "/readyz")
        assert.strictEqual(ready.status, 200, ready.text)
        assert.deepStrictEqual(ready.json.kinds, {
          browser: { available: true },
          context: { available: true },
          sandbox: { available: false, reason: RUNC_REASON }
        })
        assert.strictEqual(ready.json.sandbox_pool.capacity, 0)
      })
    )

    it.effect("browser sessions run as before", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* account
        const created = yield* api("POST", "/v1/sessions", { key, body: {} })
        assert.strictEqual(created.status, 201, created.text)
        yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
        assert.strictEqual((yield* api("DELETE", `/v1/sessions/${created.json.id}`, { key })).status, 204)
      })
    )
  })
})

describe("a node set to run no sandboxes and no context sessions", () => {
  layer(
    TestService.layer({ browserPoolSize: 0, maxBrowsers: 1, maxContexts: 0, sandbox: { maxSandboxes: 0 } }),
    { excludeTestServices: true }
  )("MAX_SANDBOXES=0, MAX_CONTEXTS=0, MAX_BROWSERS=1", (it) => {
    it.effect(
      "names the setting for the kinds it runs none of, and a full node is still capacity_exhausted with Retry-After",
      () =>
        Effect.gen(function* () {
          const service = yield* TestService.TestService
          const { key } = yield* account
          const sandbox = yield* api("POST", "/v1/sessions", { key, body: { session_type: "sandbox" } })
          assert.strictEqual(sandbox.status, 503, sandbox.text)
          assert.deepStrictEqual(sandbox.json.error, {
            code: "session_type_unavailable",
            message:
              "This service runs no sandbox sessions: MAX_SANDBOXES is 0: set it above 0, or unset it, to run sandboxes."
          })
          const context = yield* api("POST", "/v1/sessions", { key, body: { isolation: "context" } })
          assert.strictEqual(context.status, 503, context.text)
          assert.deepStrictEqual(context.json.error, {
            code: "session_type_unavailable",
            message:
              "This service runs no context sessions: MAX_CONTEXTS is 0: set it above 0, or unset it, to run context sessions."
          })
          assert.isNull(context.headers.get("retry-after"))

          const ready = yield* api("GET", "/readyz")
          assert.strictEqual(ready.status, 200, ready.text)
          assert.deepStrictEqual(ready.json.kinds, {
            browser: { available: true },
            context: {
              available: false,
              reason: "MAX_CONTEXTS is 0: set it above 0, or unset it, to run context sessions"
            },
            sandbox: {
              available: false,
              reason: "MAX_SANDBOXES is 0: set it above 0, or unset it, to run sandboxes"
            }
          })

          // Browsers it runs: its one place taken, the next create is full, which waiting cures.
          const first = yield* api("POST", "/v1/sessions", { key, body: {} })
          assert.strictEqual(first.status, 201, first.text)
          yield* waitForSession(service.baseUrl, key, first.json.id, isReady)
          const full = yield* api("POST", "/v1/sessions", { key, body: {} })
          assert.strictEqual(full.status, 503, full.text)
          assert.deepStrictEqual(full.json.error, {
            code: "capacity_exhausted",
            message: "No browser capacity is free; retry later."
          })
          assert.strictEqual(full.headers.get("retry-after"), "2")
          assert.strictEqual((yield* api("DELETE", `/v1/sessions/${first.json.id}`, { key })).status, 204)
        })
    )
  })
})
