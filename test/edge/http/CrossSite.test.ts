import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request, type RequestOptions, signUp, uniqueEmail } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const FORBIDDEN = { error: { code: "forbidden", message: "Access denied." } }

layer(TestService.layer({ browserPoolSize: 0 }))("cross-site requests", (it) => {
  describe("with the dashboard cookie", () => {
    it.effect("a state change sent from another site is 403 and changes nothing", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const user = yield* signUp(service.baseUrl)
        const keys = () =>
          Effect.map(api("GET", "/v1/keys", { cookie: user.cookie }), (r) => r.json.keys.length)
        const before = yield* keys()
        for (const headers of [
          { origin: "https://evil.example" },
          { origin: "null" },
          { origin: service.baseUrl.replace("127.0.0.1", "localhost") },
          { "sec-fetch-site": "cross-site" },
          { "sec-fetch-site": "same-site" },
          { "sec-fetch-site": "cross-site", origin: service.baseUrl }
        ]) {
          const forged = yield* api("POST", "/v1/keys", {
            cookie: user.cookie,
            headers,
            body: { name: "forged" }
          })
          assert.strictEqual(forged.status, 403, JSON.stringify(headers))
          assert.deepStrictEqual(forged.json, FORBIDDEN)
          const deleted = yield* api("DELETE", `/v1/keys/${user.keyId}`, { cookie: user.cookie, headers })
          assert.strictEqual(deleted.status, 403)
        }
        assert.strictEqual(yield* keys(), before, "no key was created or revoked")
        const checkout = yield* api("POST", "/v1/billing/checkout", {
          cookie: user.cookie,
          body: { amount_usd: 10 }
        })
        const pay = yield* api("POST", `/billing/checkout/${checkout.json.id}`, {
          cookie: user.cookie,
          headers: { origin: "https://evil.example" }
        })
        assert.strictEqual(pay.status, 403, "the local checkout's button too")
      })
    )

    it.effect("the dashboard's own requests, curl and reads from anywhere pass", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const user = yield* signUp(service.baseUrl)
        const own = yield* api("POST", "/v1/keys", {
          cookie: user.cookie,
          headers: { origin: service.baseUrl, "sec-fetch-site": "same-origin" },
          body: { name: "dashboard" }
        })
        assert.strictEqual(own.status, 201, own.text)
        // Sent to the address the browser used (the Host), whatever PUBLIC_URL says.
        const byHost = yield* api("POST", "/v1/keys", {
          cookie: user.cookie,
          headers: { origin: service.baseUrl, host: new URL(service.baseUrl).host },
          body: { name: "by host" }
        })
        assert.strictEqual(byHost.status, 201)
        const typedIn = yield* api("POST", "/v1/keys", {
          cookie: user.cookie,
          headers: { "sec-fetch-site": "none" },
          body: { name: "bookmarked" }
        })
        assert.strictEqual(typedIn.status, 201)
        const curl = yield* api("POST", "/v1/keys", { cookie: user.cookie, body: { name: "curl" } })
        assert.strictEqual(curl.status, 201, "no Origin, no Sec-Fetch-Site: not a browser")
        const read = yield* api("GET", "/v1/keys", {
          cookie: user.cookie,
          headers: { origin: "https://evil.example", "sec-fetch-site": "cross-site" }
        })
        assert.strictEqual(read.status, 200)
      })
    )
  })

  it.effect("a Bearer key carries no ambient credential: a cross-origin call with it passes", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const user = yield* signUp(service.baseUrl)
      const response = yield* api("POST", "/v1/billing/alerts", {
        key: user.key,
        headers: { origin: "https://app.example", "sec-fetch-site": "cross-site" },
        body: { low_balance_threshold_usd: 2 }
      })
      assert.strictEqual(response.status, 200, response.text)
    })
  )

  it.effect("logging in from another site is refused (no login CSRF), and sets no cookie", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const user = yield* signUp(service.baseUrl)
      const forged = yield* api("POST", "/auth/login", {
        headers: { origin: "https://evil.example" },
        body: { email: user.email, password: user.password }
      })
      assert.strictEqual(forged.status, 403)
      assert.isNull(forged.headers.get("set-cookie"))
      const registered = yield* api("POST", "/auth/register", {
        headers: { "sec-fetch-site": "cross-site" },
        body: { email: uniqueEmail(), password: "a long enough password" }
      })
      assert.strictEqual(registered.status, 403)
      const own = yield* api("POST", "/auth/login", {
        headers: { origin: service.baseUrl },
        body: { email: user.email, password: user.password }
      })
      assert.strictEqual(own.status, 200)
    })
  )
})
