import { assert, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { request, uniqueEmail } from "../../support/Client.ts"
import * as OidcProvider from "../../support/OidcProvider.ts"
import * as TestService from "../../support/TestService.ts"

/** The two providers the service is configured with, by the name it knows them by. */
class Providers extends Context.Service<
  Providers,
  { readonly local: OidcProvider.TestOidcProvider; readonly corp: OidcProvider.TestOidcProvider }
>()("test/Providers") {}
type ProviderName = "local" | "corp"

const existingEmail = uniqueEmail()
const bobEmail = uniqueEmail()
const users: ReadonlyArray<OidcProvider.TestUser> = [
  { sub: "bob-1", email: bobEmail, email_verified: true, name: "Bob" },
  { sub: "alice-1", email: existingEmail, email_verified: true, name: "Alice" },
  { sub: "eve-1", email: uniqueEmail(), email_verified: false, name: "Eve" }
]
/** The second provider knows Bob by another subject, with the same verified email. */
const corpUsers: ReadonlyArray<OidcProvider.TestUser> = [
  { sub: "corp|bob", email: bobEmail, email_verified: true, name: "Bob at Corp" }
]

/** Two real OpenID Connect providers on loopback, and the service configured with both. */
const setup = Layer.unwrap(
  Effect.gen(function* () {
    const port = yield* TestService.freePort
    const local = yield* OidcProvider.serve({
      redirectUris: [`http://127.0.0.1:${port}/auth/local/callback`],
      users
    })
    const corp = yield* OidcProvider.serve({
      redirectUris: [`http://127.0.0.1:${port}/auth/corp/callback`],
      users: corpUsers
    })
    const config = (name: ProviderName, provider: OidcProvider.TestOidcProvider) => ({
      name,
      issuer: provider.issuer,
      clientId: provider.clientId,
      clientSecret: provider.clientSecret
    })
    return TestService.layer({
      port,
      browserPoolSize: 0,
      oidcProviders: [config("local", local), config("corp", corp)]
    }).pipe(Layer.merge(Layer.succeed(Providers, { local, corp })))
  })
)

const get = (url: string, cookie?: string) =>
  Effect.promise(async () => {
    const response = await fetch(url, { redirect: "manual", headers: cookie === undefined ? {} : { cookie } })
    const text = await response.text()
    const cookies = response.headers.getSetCookie()
    const named = (name: string) => cookies.find((c) => c.startsWith(`${name}=`))?.split(";")[0] ?? ""
    return {
      status: response.status,
      location: response.headers.get("location"),
      cookie: named("service_session"),
      stateCookie: named("rbs_login_state"),
      cookies,
      setCookie: response.headers.get("set-cookie") ?? "",
      json: text.startsWith("{") ? JSON.parse(text) : undefined
    }
  })

/** The whole browser round trip: our login, the provider's pages as `sub`, our callback. */
const loginAs = (sub: string, returnTo?: string, via: ProviderName = "local") =>
  Effect.gen(function* () {
    const service = yield* TestService.TestService
    const provider = (yield* Providers)[via]
    const query = returnTo === undefined ? "" : `?return_to=${encodeURIComponent(returnTo)}`
    const start = yield* get(`${service.baseUrl}/auth/${via}/login${query}`)
    assert.strictEqual(start.status, 302)
    assert.isTrue(start.location!.startsWith(provider.issuer), start.location!)
    assert.isNotEmpty(start.stateCookie)
    const callback = yield* Effect.promise(() => provider.login(start.location!, sub))
    assert.strictEqual(callback.origin, service.baseUrl)
    return {
      callback,
      stateCookie: start.stateCookie,
      answer: yield* get(callback.toString(), start.stateCookie)
    }
  })

layer(setup, { excludeTestServices: true })("login with an OpenID Connect provider", (it) => {
  it.effect("a first login creates the user, a later one finds them; the cookie works", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const providers = yield* Effect.flatMap(TestService.TestService, (s) =>
        request(s.baseUrl, "GET", "/auth/providers")
      )
      assert.deepStrictEqual(providers.json.providers, [
        { name: "local", login_url: `${service.baseUrl}/auth/local/login` },
        { name: "corp", login_url: `${service.baseUrl}/auth/corp/login` }
      ])

      const first = yield* loginAs("bob-1")
      assert.strictEqual(first.answer.status, 200)
      assert.strictEqual(first.answer.json.user.email, users[0]!.email)
      assert.include(first.answer.setCookie, "HttpOnly")
      const me = yield* request(service.baseUrl, "GET", "/auth/me", { cookie: first.answer.cookie })
      assert.strictEqual(me.json.user.id, first.answer.json.user.id)
      assert.deepStrictEqual(
        me.json.accounts.map((a: any) => [a.kind, a.role]),
        [["personal", "owner"]]
      )

      const second = yield* loginAs("bob-1")
      assert.strictEqual(second.answer.json.user.id, first.answer.json.user.id)
      // The callback is one use: replaying it, even from the same browser, is refused.
      const replay = yield* get(first.callback.toString(), first.stateCookie)
      assert.deepStrictEqual([replay.status, replay.json.error.code], [400, "login_failed"])
    })
  )

  it.effect(
    "links a provider login to the user with the same verified email; refuses an unverified one",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const registered = yield* request(service.baseUrl, "POST", "/auth/register", {
          body: { email: existingEmail, password: "correct horse battery staple" }
        })
        const linked = yield* loginAs("alice-1")
        assert.strictEqual(linked.answer.status, 200)
        assert.strictEqual(linked.answer.json.user.id, registered.json.user.id)

        const sql = yield* SqlClient.SqlClient
        const before = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM users`
        const unverified = yield* loginAs("eve-1")
        assert.deepStrictEqual(
          [unverified.answer.status, unverified.answer.json.error.code],
          [400, "login_failed"]
        )
        const after = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM users`
        assert.strictEqual(after[0]!.n, before[0]!.n)
      })
  )

  it.effect(
    "two providers at once: the same verified email is one user; a state is good only at its provider",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const viaLocal = yield* loginAs("bob-1")
        const viaCorp = yield* loginAs("corp|bob", undefined, "corp")
        assert.strictEqual(viaCorp.answer.status, 200)
        assert.strictEqual(viaCorp.answer.json.user.id, viaLocal.answer.json.user.id)
        const sql = yield* SqlClient.SqlClient
        const identities = yield* sql<{ provider: string; subject: string }>`
        SELECT provider, subject FROM user_identities WHERE user_id = ${viaLocal.answer.json.user.id}
        ORDER BY provider`
        assert.deepStrictEqual(
          identities.map((row) => [row.provider, row.subject]),
          [
            ["corp", "corp|bob"],
            ["local", "bob-1"]
          ]
        )

        // Each login is in the user's audit trail with its provider.
        const trail = yield* request(service.baseUrl, "GET", "/v1/audit/events?action=user.logged_in", {
          cookie: viaCorp.answer.cookie
        })
        assert.includeMembers(
          trail.json.data.map((event: any) => event.details.provider),
          ["local", "corp"]
        )

        // A callback begun at one provider, brought to the other's callback, is refused.
        const providers = yield* Providers
        const start = yield* get(`${service.baseUrl}/auth/local/login`)
        const callback = yield* Effect.promise(() => providers.local.login(start.location!, "bob-1"))
        const crossed = new URL(callback.toString())
        crossed.pathname = "/auth/corp/callback"
        const refused = yield* get(crossed.toString(), start.stateCookie)
        assert.deepStrictEqual([refused.status, refused.json.error.code], [400, "login_failed"])
        // And the state was not spent by the refusal: its own callback still completes.
        const completed = yield* get(callback.toString(), start.stateCookie)
        assert.strictEqual(completed.status, 200)
        // The state cookie lives on the callback path only, and is cleared once used.
        assert.include(start.cookies.join("\n"), "Path=/auth/local/callback")
        assert.include(start.cookies.join("\n"), "HttpOnly")
        assert.match(
          completed.cookies.find((c) => c.startsWith("rbs_login_state="))!,
          /Max-Age=0|Expires=Thu, 01 Jan 1970/
        )
      })
  )

  it.effect(
    "a callback brought by another browser than the one that began the login is refused (login CSRF)",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const providers = yield* Providers
        // The attacker begins a login and sends the victim the callback URL.
        const attacker = yield* get(`${service.baseUrl}/auth/local/login`)
        const callback = yield* Effect.promise(() => providers.local.login(attacker.location!, "bob-1"))
        const withoutCookie = yield* get(callback.toString())
        assert.deepStrictEqual([withoutCookie.status, withoutCookie.json.error.code], [400, "login_failed"])
        assert.isEmpty(withoutCookie.cookie)
        // A browser holding the state cookie of a login of its own is refused just the same.
        const victim = yield* get(`${service.baseUrl}/auth/local/login`)
        const withOther = yield* get(callback.toString(), victim.stateCookie)
        assert.deepStrictEqual([withOther.status, withOther.json.error.code], [400, "login_failed"])
        assert.isEmpty(withOther.cookie)
        // The attacker's own browser could still finish it: the refusals spent nothing.
        const own = yield* get(callback.toString(), attacker.stateCookie)
        assert.strictEqual(own.status, 200)
      })
  )

  it.effect("sends the browser back to a return_to path on this service only", () =>
    Effect.gen(function* () {
      const back = yield* loginAs("bob-1", "/dashboard?tab=keys")
      assert.strictEqual(back.answer.status, 303)
      assert.strictEqual(back.answer.location, "/dashboard?tab=keys")
      assert.isNotEmpty(back.answer.cookie)
      for (const elsewhere of ["//evil.example/", "https://evil.example/", "/\\evil.example"]) {
        const ignored = yield* loginAs("bob-1", elsewhere)
        assert.strictEqual(ignored.answer.status, 200, elsewhere)
      }
    })
  )

  it.effect("an unknown provider is 404; a made-up state is 400", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const unknown = yield* get(`${service.baseUrl}/auth/nope/login`)
      assert.deepStrictEqual([unknown.status, unknown.json.error.code], [404, "provider_not_found"])
      const forged = yield* get(`${service.baseUrl}/auth/local/callback?code=abc&state=made-up`)
      assert.deepStrictEqual([forged.status, forged.json.error.code], [400, "login_failed"])
    })
  )
})
