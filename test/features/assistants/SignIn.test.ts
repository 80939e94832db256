import { assert, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { request, signUp, uniqueEmail } from "../../support/Client.ts"
import * as OidcProvider from "../../support/OidcProvider.ts"
import * as TestService from "../../support/TestService.ts"

class Provider extends Context.Service<Provider, OidcProvider.TestOidcProvider>()("test/AssistantIdp") {}

const carolEmail = uniqueEmail()

/** A real OpenID Connect provider on loopback, configured as the assistant sign-in's (`ASSISTANT_IDP`). */
const setup = Layer.unwrap(
  Effect.gen(function* () {
    const port = yield* TestService.freePort
    const provider = yield* OidcProvider.serve({
      redirectUris: [`http://127.0.0.1:${port}/auth/assistant/callback`],
      users: [
        { sub: "carol-1", email: carolEmail, email_verified: true, name: "Carol" },
        { sub: "dan-1", email: uniqueEmail(), email_verified: true, name: "Dan" }
      ]
    })
    return TestService.layer({
      port,
      browserPoolSize: 0,
      oidcProviders: [
        {
          name: "assistant",
          issuer: provider.issuer,
          clientId: provider.clientId,
          clientSecret: provider.clientSecret
        }
      ],
      assistantIdp: "assistant"
    }).pipe(Layer.merge(Layer.succeed(Provider, provider)))
  })
)

layer(setup, { excludeTestServices: true })("assistant sign-in", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  it.effect("a person signs in at the provider and is linked to the assistant; each link is one use", () =>
    Effect.gen(function* () {
      const provider = yield* Provider
      const user = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
      const created = yield* api("POST", "/v1/assistants", { key: user.key, body: { name: "greeter" } })
      assert.strictEqual(created.status, 201, created.text)
      const id = created.json.id as string
      yield* api("POST", `/v1/assistants/${id}/pause`, { key: user.key })

      // The sign-in's provider is not a login provider.
      const providers = yield* api("GET", "/auth/providers")
      assert.deepStrictEqual(providers.json.providers, [])
      const login = yield* api("GET", "/auth/assistant/login")
      assert.strictEqual(login.status, 404, login.text)

      assert.strictEqual((yield* api("GET", `/auth/assistant/login-url?assistant_id=${id}`)).status, 401)
      const other = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
      const foreign = yield* api("GET", `/auth/assistant/login-url?assistant_id=${id}`, { key: other.key })
      assert.strictEqual(foreign.status, 404, foreign.text)
      assert.strictEqual(foreign.json.error.code, "assistant_not_found")
      const notIdp = yield* api("GET", `/auth/elsewhere/login-url?assistant_id=${id}`, { key: user.key })
      assert.strictEqual(notIdp.status, 404, notIdp.text)

      const started = yield* api("GET", `/auth/assistant/login-url?assistant_id=${id}`, { key: user.key })
      assert.strictEqual(started.status, 200, started.text)
      assert.include(started.json, { object: "assistant_login_url", assistant_id: id, provider: "assistant" })
      assert.isTrue(started.json.url.startsWith(provider.issuer), started.json.url)

      // Carol opens it in her own browser (no cookie of ours), signs in, and comes back.
      const callback = yield* Effect.promise(() => provider.login(started.json.url, "carol-1"))
      const linked = yield* Effect.promise(async () => {
        const response = await fetch(callback.toString(), { redirect: "manual" })
        return { status: response.status, json: (await response.json()) as any }
      })
      assert.strictEqual(linked.status, 200, JSON.stringify(linked.json))
      assert.include(linked.json, {
        object: "assistant_link",
        assistant_id: id,
        provider: "assistant",
        subject: "carol-1",
        email: carolEmail
      })
      const replay = yield* Effect.promise(() => fetch(callback.toString()).then((r) => r.status))
      assert.strictEqual(replay, 400)

      // A provider answering with form_post comes back with a POST of the same fields.
      const again = yield* api("GET", `/auth/assistant/login-url?assistant_id=${id}`, { key: user.key })
      const posted = yield* Effect.promise(() => provider.login(again.json.url, "dan-1"))
      const form = yield* Effect.promise(async () => {
        const response = await fetch(new URL("/auth/assistant/callback", callback).toString(), {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: posted.searchParams.toString()
        })
        return { status: response.status, json: (await response.json()) as any }
      })
      assert.strictEqual(form.status, 200, JSON.stringify(form.json))
      assert.strictEqual(form.json.subject, "dan-1")

      const sql = yield* SqlClient.SqlClient
      const links = yield* sql<{ subject: string }>`
        SELECT subject FROM assistant_links WHERE assistant_id = ${id} ORDER BY subject`
      assert.deepStrictEqual(
        links.map((row) => row.subject),
        ["carol-1", "dan-1"]
      )
      const record = yield* api("GET", `/v1/assistants/${id}`, { key: user.key })
      assert.deepStrictEqual(
        record.json.links.map((link: any) => [link.provider, link.subject]),
        [
          ["assistant", "carol-1"],
          ["assistant", "dan-1"]
        ]
      )
      assert.strictEqual(record.json.links[0].email, carolEmail)
      const audit = yield* api("GET", "/v1/audit/events?action=assistant.linked", { cookie: user.cookie })
      assert.lengthOf(audit.json.data, 2)
    })
  )
})
