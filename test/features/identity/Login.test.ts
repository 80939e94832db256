import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request, type RequestOptions, signUp, uniqueEmail } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"
import { tamper } from "../../support/Tamper.ts"

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const password = "correct horse battery staple"

const login = (email: string, pass = password) =>
  Effect.map(api("POST", "/auth/login", { body: { email, password: pass } }), (response) => ({
    ...response,
    cookie: (response.headers.get("set-cookie") ?? "").split(";")[0]!
  }))

layer(TestService.layer({ browserPoolSize: 0 }), { excludeTestServices: true })("logged-in people", (it) => {
  describe("/auth/me", () => {
    it.effect("answers the user with their accounts and role in each", () =>
      Effect.gen(function* () {
        const owner = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const viewer = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const org = yield* api("POST", "/v1/accounts/organizations", {
          cookie: owner.cookie,
          body: { name: `me-${owner.userId.slice(0, 8)}` }
        })
        yield* api("POST", "/v1/accounts/current/members", {
          cookie: owner.cookie,
          headers: { "x-service-account": org.json.account.id },
          body: { email: viewer.email, role: "viewer" }
        })
        const me = yield* api("GET", "/auth/me", { cookie: viewer.cookie })
        assert.strictEqual(me.status, 200)
        assert.strictEqual(me.json.user.id, viewer.userId)
        assert.deepStrictEqual(
          me.json.accounts.map((a: any) => [a.kind, a.role]),
          [
            ["personal", "owner"],
            ["organization", "viewer"]
          ]
        )
        // Keys are not people.
        assert.strictEqual((yield* api("GET", "/auth/me", { key: viewer.key })).status, 403)
      })
    )
  })

  describe("access tokens", () => {
    it.effect("POST /auth/token mints a 15-minute JWT that /v1/* accepts as Bearer, acting as the user", () =>
      Effect.gen(function* () {
        const user = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const org = yield* api("POST", "/v1/accounts/organizations", {
          cookie: user.cookie,
          body: { name: `tok-${user.userId.slice(0, 8)}` }
        })
        const minted = yield* api("POST", "/auth/token", {
          cookie: user.cookie,
          headers: { "x-service-account": org.json.account.id }
        })
        assert.strictEqual(minted.status, 200, minted.text)
        assert.strictEqual(minted.json.token_type, "Bearer")
        assert.strictEqual(minted.json.account_id, org.json.account.id)
        assert.approximately(minted.json.expires_in, 900, 2)
        const token = minted.json.access_token
        assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/)

        // The token's account is the default; the user's other accounts stay reachable by header.
        const current = yield* api("GET", "/v1/accounts/current", { key: token })
        assert.strictEqual(current.json.account.id, org.json.account.id)
        const personal = yield* api("GET", "/v1/accounts/current", {
          key: token,
          headers: { "x-service-account": "personal" }
        })
        assert.strictEqual(personal.json.account.personal, true)
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: token })).status, 200)
        // A token does not mint tokens.
        assert.strictEqual((yield* api("POST", "/auth/token", { key: token })).status, 403)
        // A tampered token is 401.
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: tamper(token) })).status, 401)
      })
    )

    it.effect("logout everywhere ends every dashboard session and every access token", () =>
      Effect.gen(function* () {
        const user = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const second = yield* login(user.email)
        const token = (yield* api("POST", "/auth/token", { cookie: user.cookie })).json.access_token
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: token })).status, 200)
        const out = yield* api("POST", "/auth/logout-everywhere", { cookie: second.cookie })
        assert.strictEqual(out.status, 204)
        assert.strictEqual((yield* api("GET", "/auth/me", { cookie: user.cookie })).status, 401)
        assert.strictEqual((yield* api("GET", "/auth/me", { cookie: second.cookie })).status, 401)
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: token })).status, 401)
        // API keys are not sessions: they keep working.
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: user.key })).status, 200)
        const again = yield* login(user.email)
        assert.strictEqual((yield* api("GET", "/auth/me", { cookie: again.cookie })).status, 200)
      })
    )
  })
})

layer(
  TestService.layer({ browserPoolSize: 0, limits: { loginAttemptsPerEmail: 3, loginAttemptsPerIp: 6 } }),
  {
    excludeTestServices: true
  }
)("login limits", (it) => {
  it.effect("limits attempts per email, then per client IP, with 429 rate_limited and the headers", () =>
    Effect.gen(function* () {
      const email = uniqueEmail()
      assert.strictEqual((yield* api("POST", "/auth/register", { body: { email, password } })).status, 201)
      for (let i = 0; i < 3; i++) {
        const wrong = yield* login(email, "wrong password!")
        assert.strictEqual(wrong.status, 401)
        assert.strictEqual(wrong.headers.get("x-ratelimit-remaining"), String(2 - i))
        assert.strictEqual(wrong.headers.get("x-ratelimit-scope"), "principal")
      }
      // Past the budget even the right password is refused until the window resets.
      const limited = yield* login(email)
      assert.strictEqual(limited.status, 429)
      assert.deepStrictEqual(limited.json, { error: { code: "rate_limited", message: "Too many requests." } })
      assert.isAtLeast(Number(limited.headers.get("retry-after")), 1)
      assert.strictEqual(limited.headers.get("x-ratelimit-limit"), "3")

      // Other emails from the same address share the per-IP budget (6 here; 4 spent).
      const unknown = yield* login(uniqueEmail())
      assert.deepStrictEqual([unknown.status, unknown.json.error.code], [401, "invalid_credentials"])
      assert.strictEqual((yield* login(uniqueEmail())).status, 401)
      const byIp = yield* login(uniqueEmail())
      assert.strictEqual(byIp.status, 429)
      assert.strictEqual(byIp.headers.get("x-ratelimit-limit"), "6")
    })
  )
})
