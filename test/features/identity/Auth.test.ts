import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { request, signUp, uniqueEmail } from "../../support/Client.ts"
import { until } from "../../support/Poll.ts"
import * as TestService from "../../support/TestService.ts"
import * as FsSync from "node:fs"
import * as Passwords from "../../../src/features/identity/Passwords.ts"
import { DEFAULT_PASSWORD_SCRYPT_N } from "../../../src/platform/config/Config.ts"

const password = "correct horse battery staple"

layer(TestService.layer({ browserPoolSize: 0 }), { excludeTestServices: true })("auth and keys", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  describe("POST /auth/register", () => {
    it.effect("creates a user and their personal account", () =>
      Effect.gen(function* () {
        const email = uniqueEmail()
        const response = yield* api("POST", "/auth/register", { body: { email, password } })
        assert.strictEqual(response.status, 201)
        assert.deepStrictEqual(Object.keys(response.json.user).sort(), ["created_at", "email", "id"])
        assert.strictEqual(response.json.user.email, email)
        assert.match(response.json.user.created_at, /^\d{4}-\d{2}-\d{2}T.*Z$/)
        const sql = yield* SqlClient.SqlClient
        const accounts = yield* sql`
          SELECT a.kind, m.role FROM accounts a JOIN account_members m ON m.account_id = a.id
          WHERE m.user_id = ${response.json.user.id}`
        assert.deepStrictEqual(accounts, [{ kind: "personal", role: "owner" }])
        const [row] = yield* sql<{
          password_hash: string
        }>`SELECT password_hash FROM users WHERE email = ${email}`
        // scrypt at the configured cost (PASSWORD_SCRYPT_N; OWASP's 2^17 unless set), r = 8, p = 1.
        assert.match(
          row!.password_hash,
          new RegExp(`^scrypt\\$${TestService.TEST_SCRYPT_N}\\$8\\$1\\$[\\w-]{22}\\$[\\w-]{43}$`)
        )
        assert.notInclude(row!.password_hash, password)
      })
    )

    it.effect("a password hashed at another cost (OWASP's, or an older setting) is checked at its own", () =>
      Effect.gen(function* () {
        const email = uniqueEmail()
        assert.strictEqual((yield* api("POST", "/auth/register", { body: { email, password } })).status, 201)
        // As a service at the default cost would have stored it.
        const stored = yield* Passwords.hash(password, DEFAULT_PASSWORD_SCRYPT_N)
        assert.match(stored, /^scrypt\$131072\$8\$1\$/)
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE users SET password_hash = ${stored} WHERE email = ${email}`
        const ok = yield* api("POST", "/auth/login", { body: { email, password } })
        assert.strictEqual(ok.status, 200, ok.text)
        const wrong = yield* api("POST", "/auth/login", { body: { email, password: "wrong password!" } })
        assert.strictEqual(wrong.status, 401)
        // A stored cost outside what scrypt may be asked for is a refusal, not a crash.
        yield* sql`UPDATE users SET password_hash = ${stored.replace("131072", "3")} WHERE email = ${email}`
        assert.strictEqual((yield* api("POST", "/auth/login", { body: { email, password } })).status, 401)
      })
    )

    it.effect("rejects a bad email, a short password and a wrong type with invalid_field", () =>
      Effect.gen(function* () {
        const cases = [
          [{ email: "not-an-email", password }, "email"],
          [{ email: uniqueEmail(), password: "short" }, "password"],
          [{ email: 42, password }, "email"],
          [{ email: uniqueEmail() }, "password"]
        ] as const
        for (const [body, field] of cases) {
          const response = yield* api("POST", "/auth/register", { body })
          assert.strictEqual(response.status, 400, JSON.stringify(body))
          assert.deepStrictEqual(response.json, {
            error: { code: "invalid_field", message: `Invalid value for field: ${field}.` }
          })
        }
      })
    )

    it.effect(
      "answers a registered email, whatever its case, as a new one, and leaves its owner as they were",
      () =>
        Effect.gen(function* () {
          const email = uniqueEmail()
          const first = yield* api("POST", "/auth/register", { body: { email, password } })
          assert.strictEqual(first.status, 201)
          const taken = email.toUpperCase()
          const again = yield* api("POST", "/auth/register", {
            body: { email: taken, password: "another long password" }
          })
          const fresh = uniqueEmail()
          const unknown = yield* api("POST", "/auth/register", { body: { email: fresh, password } })
          // The same status, shape and headers: nothing tells the two apart.
          assert.strictEqual(again.status, unknown.status)
          assert.deepStrictEqual(Object.keys(again.json.user).sort(), Object.keys(unknown.json.user).sort())
          assert.strictEqual(again.json.user.email, taken)
          assert.notStrictEqual(again.json.user.id, first.json.user.id, "not the owner's id")
          assert.deepStrictEqual(
            [...again.headers.keys()].filter((name) => name !== "date" && name !== "content-length").sort(),
            [...unknown.headers.keys()].filter((name) => name !== "date" && name !== "content-length").sort()
          )
          const sql = yield* SqlClient.SqlClient
          const users = yield* sql<{ id: string }>`SELECT id FROM users WHERE lower(email) = lower(${email})`
          assert.deepStrictEqual(users, [{ id: first.json.user.id }], "no second user")
          // The owner's password still logs in; the newcomer's does not.
          assert.strictEqual((yield* api("POST", "/auth/login", { body: { email, password } })).status, 200)
          const intruder = yield* api("POST", "/auth/login", {
            body: { email, password: "another long password" }
          })
          assert.strictEqual(intruder.status, 401)
        })
    )

    it.effect("answers malformed JSON with invalid_request", () =>
      Effect.gen(function* () {
        const response = yield* api("POST", "/auth/register", { rawBody: "{nope" })
        assert.strictEqual(response.status, 400)
        assert.deepStrictEqual(response.json, {
          error: { code: "invalid_request", message: "Request body is malformed." }
        })
      })
    )
  })

  describe("login, me, logout", () => {
    it.effect("sets an HttpOnly SameSite=Lax cookie that /auth/me accepts until logout", () =>
      Effect.gen(function* () {
        const email = uniqueEmail()
        yield* api("POST", "/auth/register", { body: { email, password } })
        const login = yield* api("POST", "/auth/login", { body: { email, password } })
        assert.strictEqual(login.status, 200)
        assert.strictEqual(login.json.user.email, email)
        const setCookie = login.headers.get("set-cookie")!
        assert.match(setCookie, /^service_session=[A-Za-z0-9_-]{43};/)
        assert.include(setCookie, "HttpOnly")
        assert.include(setCookie, "SameSite=Lax")
        assert.include(setCookie, "Path=/")
        assert.notInclude(setCookie, "Secure", "plain http gets no Secure flag")
        const cookie = setCookie.split(";")[0]!

        const me = yield* api("GET", "/auth/me", { cookie })
        assert.strictEqual(me.status, 200)
        assert.strictEqual(me.json.user.email, email)
        assert.strictEqual(me.json.accounts.length, 1)
        assert.strictEqual(me.json.accounts[0].personal, true)
        assert.strictEqual(me.json.accounts[0].role, "owner")

        const logout = yield* api("POST", "/auth/logout", { cookie })
        assert.strictEqual(logout.status, 204)
        assert.match(
          logout.headers.get("set-cookie")!,
          /^service_session=;.*Max-Age=0|Expires=Thu, 01 Jan 1970/
        )
        const after = yield* api("GET", "/auth/me", { cookie })
        assert.strictEqual(after.status, 401)
        assert.strictEqual(after.json.error.code, "unauthorized")
      })
    )

    it.effect("answers 401 for a wrong password and for an unknown email, the same way", () =>
      Effect.gen(function* () {
        const email = uniqueEmail()
        yield* api("POST", "/auth/register", { body: { email, password } })
        const wrong = yield* api("POST", "/auth/login", { body: { email, password: "wrong password!" } })
        const unknown = yield* api("POST", "/auth/login", { body: { email: uniqueEmail(), password } })
        for (const response of [wrong, unknown]) {
          assert.strictEqual(response.status, 401)
          assert.deepStrictEqual(response.json, {
            error: { code: "invalid_credentials", message: "Invalid email or password." }
          })
          assert.isNull(response.headers.get("set-cookie"))
        }
      })
    )

    it.effect("answers /auth/me without a cookie with 401", () =>
      Effect.gen(function* () {
        const response = yield* api("GET", "/auth/me")
        assert.strictEqual(response.status, 401)
        assert.strictEqual(response.json.error.code, "unauthorized")
      })
    )
  })

  describe("API keys", () => {
    it.effect("creates a svc_live_ key shown once and stored as SHA-256", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        assert.match(account.key, /^svc_live_[A-Za-z0-9_-]{43}$/)

        const list = yield* api("GET", "/v1/keys", { cookie: account.cookie })
        assert.strictEqual(list.status, 200)
        assert.strictEqual(list.json.keys.length, 1)
        const [key] = list.json.keys
        assert.deepStrictEqual(Object.keys(key).sort(), [
          "created_at",
          "id",
          "last_used_at",
          "mode",
          "name",
          "prefix",
          "revoked_at",
          "scopes",
          "service_account_id"
        ])
        assert.deepStrictEqual([key.mode, key.scopes, key.service_account_id], ["live", null, null])
        assert.strictEqual(key.prefix, account.key.slice(0, 12))
        assert.strictEqual(key.name, "test")
        assert.isNull(key.revoked_at)
        assert.notInclude(list.text, account.key)

        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{
          secret_hash: Uint8Array
        }>`SELECT secret_hash FROM api_keys WHERE id = ${account.keyId}`
        const expected = Crypto.createHash("sha256").update(account.key).digest()
        assert.strictEqual(Buffer.from(row!.secret_hash).toString("hex"), expected.toString("hex"))
      })
    )

    it.effect("records last use of a key, written in batches", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const before = Date.now()
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: account.key })).status, 200)
        // Uses are kept in memory and flushed every few seconds, not written per request.
        let lastUsed: string | null = null
        while (lastUsed === null && Date.now() - before < 15_000) {
          yield* Effect.sleep("250 millis")
          lastUsed = (yield* api("GET", "/v1/keys", { cookie: account.cookie })).json.keys[0].last_used_at
        }
        assert.isString(lastUsed)
        assert.isAtLeast(new Date(lastUsed!).getTime(), before - 1000)
      })
    )

    it.effect("keeps a key's last use through its revocation and rotation, at once", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const before = Date.now()
        const lastUseOf = (keyId: string) =>
          Effect.map(
            api("GET", "/v1/keys", { cookie: account.cookie }),
            (listed) => listed.json.keys.find((key: any) => key.id === keyId)?.last_used_at ?? null
          )
        // A rotated key: used, then rotated away at once.
        const second = yield* api("POST", "/v1/keys", { cookie: account.cookie, body: { name: "second" } })
        assert.strictEqual(second.status, 201, second.text)
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: second.json.secret })).status, 200)
        const rotated = yield* api("POST", `/v1/keys/${second.json.id}/rotate`, {
          cookie: account.cookie,
          body: { grace_days: 0 }
        })
        assert.isBelow(rotated.status, 300, rotated.text)
        const rotatedUse = yield* lastUseOf(second.json.id)
        assert.isString(rotatedUse, "the rotated key's use is kept")
        assert.isAtLeast(new Date(rotatedUse).getTime(), before - 1000)

        // The sign-up's key: used, then revoked at once, before any batch was written.
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: account.key })).status, 200)
        const revoked = yield* api("DELETE", `/v1/keys/${account.keyId}`, { cookie: account.cookie })
        assert.isBelow(revoked.status, 300, revoked.text)
        const revokedUse = yield* lastUseOf(account.keyId)
        assert.isString(revokedUse, "the revoked key's use is kept")
        assert.isAtLeast(new Date(revokedUse).getTime(), before - 1000)
      })
    )

    it.effect("rejects a missing or empty key name", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        for (const body of [{}, { name: "   " }, { name: 7 }]) {
          const response = yield* api("POST", "/v1/keys", { cookie: account.cookie, body })
          assert.strictEqual(response.status, 400)
          assert.strictEqual(response.json.error.code, "invalid_field")
          assert.include(response.json.error.message, "name")
        }
      })
    )

    it.effect("key routes refuse a Bearer key with 403 and no credentials with 401", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const withKey = yield* api("GET", "/v1/keys", { key: account.key })
        assert.strictEqual(withKey.status, 403)
        assert.deepStrictEqual(withKey.json, { error: { code: "forbidden", message: "Access denied." } })
        const createWithKey = yield* api("POST", "/v1/keys", { key: account.key, body: { name: "x" } })
        assert.strictEqual(createWithKey.status, 403)
        const none = yield* api("GET", "/v1/keys")
        assert.strictEqual(none.status, 401)
        const badKey = yield* api("GET", "/v1/keys", { key: "svc_live_nope" })
        assert.strictEqual(badKey.status, 401)
      })
    )

    it.effect("public routes answer a missing, unknown or revoked key with 401 unauthorized", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const body = { error: { code: "unauthorized", message: "Missing or invalid API key." } }
        const missing = yield* api("GET", "/v1/sessions")
        assert.strictEqual(missing.status, 401)
        assert.deepStrictEqual(missing.json, body)
        const unknown = yield* api("GET", "/v1/sessions", { key: `svc_live_${"x".repeat(43)}` })
        assert.strictEqual(unknown.status, 401)
        assert.deepStrictEqual(unknown.json, body)
        // A bad bearer credential is 401 even beside a valid dashboard cookie.
        const badKeyWithCookie = yield* api("GET", "/v1/sessions", {
          cookie: account.cookie,
          key: `svc_live_${"y".repeat(43)}`
        })
        assert.strictEqual(badKeyWithCookie.status, 401)

        const sql = yield* SqlClient.SqlClient
        // A second back: the database keeps microseconds, the service's clock milliseconds.
        // Written straight to the table, as another node would: its trigger's NOTIFY clears this
        // node's kept keys (the key just authenticated, so it was kept).
        yield* sql`UPDATE api_keys SET revoked_at = now() - interval '1 second' WHERE id = ${account.keyId}`
        yield* until(
          api("GET", "/v1/sessions", { key: account.key }),
          (response) => response.status !== 200,
          2_000
        )
        const revoked = yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
        assert.strictEqual(revoked.status, 401)
        assert.deepStrictEqual(revoked.json, body)
      })
    )
  })

  describe("unknown routes and docs", () => {
    it.effect("answers an unknown route with 404 in the error shape", () =>
      Effect.gen(function* () {
        const response = yield* api("GET", "/v1/nothing-here")
        assert.strictEqual(response.status, 404)
        assert.deepStrictEqual(response.json, { error: { code: "not_found", message: "Route not found." } })
      })
    )

    it.effect("serves OpenAPI 3.1 at version 1.0.0 and Swagger UI", () =>
      Effect.gen(function* () {
        const spec = yield* api("GET", "/api-docs/openapi.json")
        assert.strictEqual(spec.status, 200)
        // The committed copy is what is served, byte for byte: `npm run openapi` writes it.
        assert.strictEqual(
          spec.text,
          FsSync.readFileSync("docs/openapi.json", "utf8"),
          "docs/openapi.json is stale: run npm run openapi"
        )
        assert.match(spec.json.openapi, /^3\.1/)
        assert.strictEqual(spec.json.info.version, "1.0.0")
        const routes: ReadonlyArray<readonly [string, string]> = [
          ["post", "/v1/sessions"],
          ["get", "/v1/sessions"],
          ["get", "/v1/sessions/{id}"],
          ["delete", "/v1/sessions/{id}"],
          ["post", "/v1/sessions/{id}/screenshot"],
          ["post", "/v1/sessions/{id}/preview-token"],
          ["post", "/v1/sessions/{id}/resize"],
          ["get", "/sessions/{id}"],
          ["get", "/v1/usage"],
          ["post", "/v1/billing/topup"],
          ["post", "/v1/billing/checkout"],
          ["get", "/v1/billing/summary"],
          ["post", "/v1/billing/account"],
          ["post", "/v1/billing/stripe/webhook"],
          ["get", "/billing/checkout/{id}"],
          ["post", "/billing/checkout/{id}"],
          ["get", "/v1/keys"],
          ["post", "/v1/keys"],
          ["post", "/auth/register"],
          ["get", "/metrics"],
          ["get", "/healthz"]
        ]
        for (const [method, path] of routes) {
          assert.property(spec.json.paths[path] ?? {}, method, `${method.toUpperCase()} ${path}`)
        }
        const create = spec.json.paths["/v1/sessions"].post
        for (const status of ["201", "400", "401", "402", "409", "429"])
          assert.property(create.responses, status)
        assert.isTrue(
          create.parameters.some((p: any) => p.in === "header" && p.name === "idempotency-key"),
          "Idempotency-Key is documented"
        )
        const ui = yield* api("GET", "/swagger-ui")
        assert.strictEqual(ui.status, 200)
        assert.include(ui.headers.get("content-type")!, "text/html")
      })
    )

    it.effect("healthz and readyz answer", () =>
      Effect.gen(function* () {
        const health = yield* api("GET", "/healthz")
        assert.deepStrictEqual([health.status, health.json], [200, { status: "ok" }])
        const ready = yield* api("GET", "/readyz")
        assert.strictEqual(ready.status, 200)
        assert.strictEqual(ready.json.database, "ok")
      })
    )
  })
})

layer(TestService.layer({ browserPoolSize: 0, publicUrl: "https://browsers.example.test" }), {
  excludeTestServices: true
})("auth behind https", (it) => {
  it.effect("marks the session cookie Secure when clients reach the service over https", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const email = uniqueEmail()
      yield* request(service.baseUrl, "POST", "/auth/register", { body: { email, password } })
      const login = yield* request(service.baseUrl, "POST", "/auth/login", { body: { email, password } })
      assert.strictEqual(login.status, 200)
      assert.include(login.headers.get("set-cookie")!, "Secure")
      const account = yield* signUp(service.baseUrl)
      const created = yield* request(service.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
      assert.strictEqual(created.json.cdp_url, `wss://browsers.example.test/sessions/${created.json.id}`)
    })
  )
})
