import { assert, describe, it, layer } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer, Redacted, Result } from "effect"
import * as Client from "openid-client"
import {
  make,
  OidcLogin,
  OidcLoginFailed,
  type OidcProviderConfig,
  OidcUnknownProvider
} from "../../../src/features/identity/OidcLogin.ts"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { parseOidcProviders } from "../../../src/platform/config/OidcProviders.ts"
import * as OidcProvider from "../../support/OidcProvider.ts"

const publicUrl = "https://rbs.example"
const redirectUri = `${publicUrl}/auth/local/callback`
const users = [
  { sub: "alice", email: "alice@example.com", email_verified: true, name: "Alice Liddell" },
  { sub: "bob", email: "bob@example.com", email_verified: false },
  { sub: "carol" }
]

const providerConfig = (idp: OidcProvider.TestOidcProvider, name = "local"): OidcProviderConfig => ({
  name,
  issuer: idp.issuer,
  clientId: idp.clientId,
  clientSecret: Redacted.make(idp.clientSecret)
})

class Idp extends Context.Service<Idp, OidcProvider.TestOidcProvider>()("test/auth/Idp") {}

const IdpLive = Layer.effect(Idp, OidcProvider.serve({ redirectUris: [redirectUri], users }))
const LoginLive = Layer.unwrap(
  Idp.useSync((idp) => OidcLogin.layer({ providers: [providerConfig(idp)], publicUrl }))
)

/** Begins a login, plays `sub` at the provider, and returns what the callback route would hold. */
const loginAt = (
  oidc: OidcLogin["Service"],
  idp: OidcProvider.TestOidcProvider,
  sub: string,
  name = "local"
) =>
  Effect.gen(function* () {
    const start = yield* oidc.begin(name)
    const callback = yield* Effect.promise(() => idp.login(start.url, sub))
    return { start, callback }
  })

const loginAs = (sub: string, options?: { readonly deny?: boolean }) =>
  Effect.gen(function* () {
    const oidc = yield* OidcLogin
    const idp = yield* Idp
    const start = yield* oidc.begin("local")
    const callback = yield* Effect.promise(() => idp.login(start.url, sub, options))
    return { oidc, idp, start, callback }
  })

layer(Layer.provideMerge(LoginLive, IdpLive))("OidcLogin against a local provider", (it) => {
  it.effect("logs a user in: begin, the provider's login and consent, complete", () =>
    Effect.gen(function* () {
      const { oidc, idp, start, callback } = yield* loginAs("alice")
      const url = new URL(start.url)
      assert.strictEqual(url.origin, idp.issuer)
      assert.strictEqual(url.searchParams.get("response_type"), "code")
      assert.strictEqual(url.searchParams.get("client_id"), idp.clientId)
      assert.strictEqual(url.searchParams.get("redirect_uri"), redirectUri)
      assert.strictEqual(start.redirectUri, redirectUri)
      assert.strictEqual(url.searchParams.get("scope"), "openid email profile")
      assert.strictEqual(url.searchParams.get("state"), start.state)
      assert.strictEqual(url.searchParams.get("nonce"), start.nonce)
      assert.strictEqual(url.searchParams.get("code_challenge_method"), "S256")
      assert.strictEqual(
        url.searchParams.get("code_challenge"),
        yield* Effect.promise(() => Client.calculatePKCECodeChallenge(start.codeVerifier))
      )
      assert.strictEqual(`${callback.origin}${callback.pathname}`, redirectUri)
      assert.strictEqual(callback.searchParams.get("state"), start.state)
      assert.isNotNull(callback.searchParams.get("code"))

      // The route sees the callback at an internal address; the redirect_uri comes from `expected`.
      const seen = new URL(`http://10.0.0.5:8080/auth/local/callback${callback.search}`)
      const userinfoCalls = () => idp.requests.filter((request) => request === "GET /me").length
      const userinfoBefore = userinfoCalls()
      const identity = yield* oidc.complete("local", seen, start)
      assert.deepStrictEqual(identity, {
        subject: "alice",
        issuer: idp.issuer,
        email: "alice@example.com",
        emailVerified: true,
        name: "Alice Liddell"
      })
      // The provider keeps email out of the ID token when it issues an access token: read from userinfo.
      assert.strictEqual(userinfoCalls(), userinfoBefore + 1)
    })
  )

  it.effect("reports an unverified email as unverified, and a missing one as null", () =>
    Effect.gen(function* () {
      const bob = yield* loginAs("bob")
      assert.deepStrictEqual(yield* bob.oidc.complete("local", bob.callback, bob.start), {
        subject: "bob",
        issuer: bob.idp.issuer,
        email: "bob@example.com",
        emailVerified: false,
        name: null
      })
      const carol = yield* loginAs("carol")
      assert.deepStrictEqual(yield* carol.oidc.complete("local", carol.callback, carol.start), {
        subject: "carol",
        issuer: carol.idp.issuer,
        email: null,
        emailVerified: false,
        name: null
      })
    })
  )

  it.effect("fails on a state that is not the one it began with", () =>
    Effect.gen(function* () {
      const { oidc, start, callback } = yield* loginAs("alice")
      const error = yield* Effect.flip(
        oidc.complete("local", callback, { ...start, state: Client.randomState() })
      )
      assert.instanceOf(error, OidcLoginFailed)
      assert.include(error.message, '"state"')
    })
  )

  it.effect("fails with another PKCE code verifier, and names no secret in its message", () =>
    Effect.gen(function* () {
      const { oidc, idp, start, callback } = yield* loginAs("alice")
      const error = yield* Effect.flip(
        oidc.complete("local", callback, { ...start, codeVerifier: Client.randomPKCECodeVerifier() })
      )
      assert.instanceOf(error, OidcLoginFailed)
      assert.include(error.message, "invalid_grant")
      for (const secret of [
        callback.searchParams.get("code")!,
        idp.clientSecret,
        start.codeVerifier,
        start.state
      ]) {
        assert.notInclude(error.message, secret)
        assert.notInclude(String(error), secret)
      }
    })
  )

  it.effect("fails on an ID token minted for another nonce", () =>
    Effect.gen(function* () {
      const { oidc, start, callback } = yield* loginAs("alice")
      const error = yield* Effect.flip(
        oidc.complete("local", callback, { ...start, nonce: Client.randomNonce() })
      )
      assert.instanceOf(error, OidcLoginFailed)
      assert.include(error.message, "nonce")
    })
  )

  it.effect("fails when the same callback is replayed", () =>
    Effect.gen(function* () {
      const { oidc, start, callback } = yield* loginAs("alice")
      assert.strictEqual((yield* oidc.complete("local", callback, start)).subject, "alice")
      const error = yield* Effect.flip(oidc.complete("local", callback, start))
      assert.instanceOf(error, OidcLoginFailed)
      assert.include(error.message, "invalid_grant")
    })
  )

  it.effect("fails when the user denies the request at the provider", () =>
    Effect.gen(function* () {
      const { oidc, start, callback } = yield* loginAs("alice", { deny: true })
      assert.strictEqual(callback.searchParams.get("error"), "access_denied")
      const error = yield* Effect.flip(oidc.complete("local", callback, start))
      assert.instanceOf(error, OidcLoginFailed)
      assert.include(error.message, "access_denied")
    })
  )

  it.effect("refuses a provider it does not know", () =>
    Effect.gen(function* () {
      const oidc = yield* OidcLogin
      assert.deepStrictEqual(oidc.providers, ["local"])
      const begun = yield* Effect.flip(oidc.begin("elsewhere"))
      assert.instanceOf(begun, OidcUnknownProvider)
      assert.strictEqual(begun.provider, "elsewhere")
      const completed = yield* Effect.flip(
        oidc.complete("elsewhere", new URL(`${redirectUri}?code=x&state=y`), {
          state: "y",
          codeVerifier: "v",
          nonce: "n",
          redirectUri
        })
      )
      assert.instanceOf(completed, OidcUnknownProvider)
    })
  )
})

describe("OidcLogin discovery and provider variants", () => {
  it.effect("speaks plain http only to a provider on loopback", () =>
    Effect.gen(function* () {
      const oidc = yield* make({
        providers: [
          {
            name: "plain",
            issuer: "http://idp.example.test",
            clientId: "rbs",
            clientSecret: Redacted.make("plain-secret")
          }
        ],
        publicUrl
      })
      const error = yield* Effect.flip(oidc.begin("plain"))
      assert.instanceOf(error, OidcLoginFailed)
      assert.include(error.message, "only requests to HTTPS are allowed")
    })
  )

  it.effect("fails while a provider is down and logs in once it is up, without a restart", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(OidcProvider.reservePort)
      const client = { clientId: "rbs-late", clientSecret: "late-client-secret" }
      const oidc = yield* make({
        providers: [
          {
            name: "late",
            issuer: `http://127.0.0.1:${port}`,
            clientId: client.clientId,
            clientSecret: Redacted.make(client.clientSecret)
          }
        ],
        publicUrl
      })
      const error = yield* Effect.flip(oidc.begin("late"))
      assert.instanceOf(error, OidcLoginFailed)
      assert.include(error.message, "discovery")
      assert.include(error.message, "could not be reached")

      const idp = yield* OidcProvider.serve({
        ...client,
        port,
        redirectUris: [`${publicUrl}/auth/late/callback`],
        users
      })
      const { start, callback } = yield* loginAt(oidc, idp, "alice", "late")
      assert.strictEqual((yield* oidc.complete("late", callback, start)).subject, "alice")
    })
  )

  it.effect(
    "uses client_secret_post where the provider offers only that, and ID token claims as they are",
    () =>
      Effect.gen(function* () {
        const idp = yield* OidcProvider.serve({
          redirectUris: [redirectUri],
          users,
          clientAuthMethod: "client_secret_post",
          claimsInIdToken: true
        })
        const oidc = yield* make({ providers: [providerConfig(idp)], publicUrl })
        for (const sub of ["alice", "bob"]) {
          const { start, callback } = yield* loginAt(oidc, idp, sub)
          assert.strictEqual((yield* oidc.complete("local", callback, start)).subject, sub)
        }
        const discoveries = idp.requests.filter(
          (request) => request === "GET /.well-known/openid-configuration"
        )
        assert.strictEqual(discoveries.length, 1, "discovery is cached")
        assert.notInclude(idp.requests, "GET /me", "the ID token had the email: no userinfo request")
      })
  )
})

describe("parseOidcProviders", () => {
  const full = {
    OIDC_GOOGLE_ISSUER: "https://accounts.google.com",
    OIDC_GOOGLE_CLIENT_ID: "google-client",
    OIDC_GOOGLE_CLIENT_SECRET: "google-secret"
  }

  it("reads nothing when no OIDC variable is set", () => {
    assert.deepStrictEqual(parseOidcProviders({ PATH: "/bin", OIDC_: "x" }), Result.succeed([]))
  })

  it("reads each provider, naming it in lowercase with - for _", () => {
    const result = parseOidcProviders({
      ...full,
      OIDC_MY_IDP_ISSUER: "http://127.0.0.1:9000/realms/test",
      OIDC_MY_IDP_CLIENT_ID: "rbs",
      OIDC_MY_IDP_CLIENT_SECRET: "idp-secret"
    })
    assert.isTrue(Result.isSuccess(result))
    const providers = Result.getOrThrow(result)
    assert.deepStrictEqual(
      providers.map(({ name, issuer, clientId }) => ({ name, issuer, clientId })),
      [
        { name: "google", issuer: "https://accounts.google.com", clientId: "google-client" },
        { name: "my-idp", issuer: "http://127.0.0.1:9000/realms/test", clientId: "rbs" }
      ]
    )
    assert.deepStrictEqual(
      providers.map((provider) => Redacted.value(provider.clientSecret)),
      ["google-secret", "idp-secret"]
    )
    assert.notInclude(JSON.stringify(providers), "secret")
  })

  it("names every missing variable of an incomplete provider, and no secret", () => {
    const result = parseOidcProviders({ OIDC_GITHUB_CLIENT_SECRET: "s3cr3t", OIDC_GITHUB_CLIENT_ID: "" })
    assert.isTrue(Result.isFailure(result))
    const message = Result.isFailure(result) ? result.failure.message : ""
    assert.include(message, "OIDC_GITHUB_ISSUER and OIDC_GITHUB_CLIENT_ID")
    assert.notInclude(message, "s3cr3t")
  })

  it("refuses an issuer that is not https, except on loopback", () => {
    for (const issuer of ["http://idp.example.com", "not a url", "https://idp.example.com/?x=1"]) {
      const result = parseOidcProviders({ ...full, OIDC_GOOGLE_ISSUER: issuer })
      assert.isTrue(Result.isFailure(result), issuer)
      if (Result.isFailure(result)) assert.include(result.failure.message, "OIDC_GOOGLE_ISSUER")
    }
    for (const issuer of ["http://localhost:8080", "http://[::1]:8080", "https://idp.example.com/tenant"]) {
      assert.isTrue(Result.isSuccess(parseOidcProviders({ ...full, OIDC_GOOGLE_ISSUER: issuer })), issuer)
    }
  })
})

describe("the login providers from the configuration provider", () => {
  const variables = {
    OIDC_MY_IDP_ISSUER: "http://127.0.0.1:9000/realms/test",
    OIDC_MY_IDP_CLIENT_ID: "rbs",
    OIDC_MY_IDP_CLIENT_SECRET: "idp-secret"
  }
  /** The providers `ServiceConfig.layerFromEnv` reads with `provider` in force. */
  const providersOf = (provider: ConfigProvider.ConfigProvider) =>
    Effect.map(ServiceConfig, (config) =>
      config.oidcProviders.map(({ name, issuer, clientId }) => ({ name, issuer, clientId }))
    ).pipe(
      Effect.provide(ServiceConfig.layerFromEnv),
      Effect.provideService(ConfigProvider.ConfigProvider, provider)
    )

  it.effect("reads them from the environment's variables and from a host's provider alike", () =>
    Effect.gen(function* () {
      const expected = [{ name: "my-idp", issuer: variables.OIDC_MY_IDP_ISSUER, clientId: "rbs" }]
      assert.deepStrictEqual(
        yield* providersOf(ConfigProvider.fromEnv({ env: { PATH: "/bin", ...variables } })),
        expected
      )
      assert.deepStrictEqual(yield* providersOf(ConfigProvider.fromUnknown(variables)), expected)
      assert.deepStrictEqual(yield* providersOf(ConfigProvider.fromUnknown({ PORT: "8080" })), [])
    })
  )
})
