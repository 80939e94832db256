import { Cache, Context, Effect, Exit, Layer, Option, Predicate, Redacted, Schema } from "effect"
import * as Client from "openid-client"
import { isLoopback, type OidcProviderConfig, PROVIDER_NAME } from "../../platform/config/OidcProviders.ts"

export type { OidcProviderConfig } from "../../platform/config/OidcProviders.ts"

/** What `begin` hands back: send the user to `url`, keep the rest (server-side or sealed) for `complete`. */
export interface OidcLoginStart {
  readonly url: string
  readonly state: string
  readonly codeVerifier: string
  readonly nonce: string
  readonly redirectUri: string
}

export interface OidcLoginExpected {
  readonly state: string
  readonly codeVerifier: string
  readonly nonce: string
  readonly redirectUri: string
}

/** The user the provider vouches for; `(issuer, subject)` identifies them, the email may change. */
export interface OidcIdentity {
  readonly subject: string
  readonly issuer: string
  readonly email: string | null
  readonly emailVerified: boolean
  readonly name: string | null
}

export class OidcUnknownProvider extends Schema.TaggedError<OidcUnknownProvider>()("OidcUnknownProvider", {
  provider: Schema.String
}) {
  override readonly message = `No login provider is named "${this.provider}".`
}

/** The message says what went wrong in words; it never carries a secret, a code, a state or a token. */
export class OidcLoginFailed extends Schema.TaggedError<OidcLoginFailed>()("OidcLoginFailed", {
  provider: Schema.String,
  message: Schema.String
}) {}

const SCOPE = "openid email profile"
/** A login waits on discovery; an unreachable provider should fail it quickly, not after 30 s. */
const HTTP_TIMEOUT_SECONDS = 10
const DISCOVERY_TTL = "1 hour"

const ProfileClaims = Schema.Struct({
  email: Schema.optional(Schema.NullOr(Schema.String)),
  // Some providers (Cognito) send the string "true".
  email_verified: Schema.optional(Schema.NullOr(Schema.Union([Schema.Boolean, Schema.String]))),
  name: Schema.optional(Schema.NullOr(Schema.String))
})
const decodeProfile = Schema.decodeUnknownOption(ProfileClaims)

const oauthErrorCode = (value: unknown) =>
  typeof value === "string" && /^[A-Za-z0-9_.-]{1,64}$/.test(value) ? value : "an error"

/**
 * Words for a failure of openid-client. Its messages name the check that
 * failed (`unexpected "state" response parameter value`) without the values;
 * the provider's own `error_description` is left out as it is free text.
 */
const describe = (cause: unknown): string => {
  if (cause instanceof Client.AuthorizationResponseError) {
    return `the provider answered the login with ${oauthErrorCode(cause.error)}`
  }
  if (cause instanceof Client.ResponseBodyError) {
    return `the provider answered with ${oauthErrorCode(cause.error)} (HTTP ${cause.status})`
  }
  if (cause instanceof Client.ClientError) {
    const inner = cause.cause
    if (inner instanceof Response) return `${cause.message} (HTTP ${inner.status})`
    return inner instanceof Error && inner.message !== cause.message
      ? `${cause.message}: ${inner.message}`
      : cause.message
  }
  if (cause instanceof TypeError && cause.message === "fetch failed") {
    const code = Predicate.hasProperty(cause.cause, "code") ? cause.cause.code : undefined
    return `the provider could not be reached${typeof code === "string" ? ` (${code})` : ""}`
  }
  if (cause instanceof Error && cause.name === "TimeoutError") return "the provider did not answer in time"
  return "unexpected error"
}

/**
 * Authenticates to the token endpoint with `client_secret_basic`, the default
 * of the specification, unless the provider's metadata offers only
 * `client_secret_post`. Decided per request, as the metadata is only known
 * after discovery.
 */
const clientAuth =
  (secret: Redacted.Redacted<string>): Client.ClientAuth =>
  (server, client, body, headers) => {
    const methods = server.token_endpoint_auth_methods_supported
    const usePost =
      methods !== undefined &&
      !methods.includes("client_secret_basic") &&
      methods.includes("client_secret_post")
    const auth = usePost
      ? Client.ClientSecretPost(Redacted.value(secret))
      : Client.ClientSecretBasic(Redacted.value(secret))
    auth(server, client, body, headers)
  }

export interface OidcLoginOptions {
  readonly providers: ReadonlyArray<OidcProviderConfig>
  /** The service's public base URL: the default callback is `<publicUrl>/auth/<name>/callback`. */
  readonly publicUrl: string
}

/**
 * OpenID Connect login with the configured providers: the authorization code
 * flow with PKCE (S256), `state` and `nonce`. Discovery happens at the first
 * login with a provider and is cached; a failed discovery is not cached, so a
 * provider that was down at start-up works once it is back.
 */
export class OidcLogin extends Context.Service<
  OidcLogin,
  {
    /** The configured provider names. */
    readonly providers: ReadonlyArray<string>
    /** The callback URL a provider redirects back to by default. */
    readonly redirectUri: (name: string) => string
    /** The provider's authorization URL and the values `complete` must check the callback against. */
    readonly begin: (
      name: string,
      redirectUri?: string
    ) => Effect.Effect<OidcLoginStart, OidcUnknownProvider | OidcLoginFailed>
    /**
     * Checks the callback (`state`, provider error, `iss`), redeems the code with
     * the PKCE verifier, validates the ID token (issuer, audience, expiry, nonce)
     * and reads the profile, from userinfo when the ID token has no email.
     */
    readonly complete: (
      name: string,
      callbackUrl: URL,
      expected: OidcLoginExpected
    ) => Effect.Effect<OidcIdentity, OidcUnknownProvider | OidcLoginFailed>
  }
>()("rbs/auth/OidcLogin") {
  static readonly layer = (options: OidcLoginOptions) => Layer.effect(OidcLogin, make(options))
}

export const make = Effect.fnUntraced(function* (options: OidcLoginOptions) {
  const byName = new Map<string, OidcProviderConfig & { readonly issuerUrl: URL }>()
  for (const provider of options.providers) {
    if (!PROVIDER_NAME.test(provider.name) || byName.has(provider.name)) {
      return yield* Effect.die(new Error(`OIDC provider name "${provider.name}" is invalid or repeated`))
    }
    const issuerUrl = yield* Effect.try({
      try: () => new URL(provider.issuer),
      catch: () => new Error(`OIDC provider "${provider.name}" has an invalid issuer URL`)
    }).pipe(Effect.orDie)
    byName.set(provider.name, { ...provider, issuerUrl })
  }
  const publicUrl = options.publicUrl.replace(/\/+$/, "")

  const lookup = (name: string) => {
    const provider = byName.get(name)
    return provider === undefined
      ? Effect.fail(new OidcUnknownProvider({ provider: name }))
      : Effect.succeed(provider)
  }

  const failed = (provider: string, step: string) => (cause: unknown) =>
    new OidcLoginFailed({
      provider,
      message: `Login with ${provider} failed (${step}): ${describe(cause)}.`
    })

  const discoveries = yield* Cache.makeWith(
    (name: string) =>
      Effect.gen(function* () {
        const provider = yield* Effect.orDie(lookup(name))
        return yield* Effect.tryPromise({
          try: () =>
            Client.discovery(
              provider.issuerUrl,
              provider.clientId,
              undefined,
              clientAuth(provider.clientSecret),
              {
                timeout: HTTP_TIMEOUT_SECONDS,
                // openid-client speaks only https unless told otherwise. A provider on
                // loopback (a development IdP, the test suite's) is reached without
                // crossing a network, so plain http is allowed there and nowhere else.
                execute: isLoopback(provider.issuerUrl) ? [Client.allowInsecureRequests] : []
              }
            ),
          catch: failed(name, "discovery")
        }).pipe(
          Effect.tapError((error) =>
            Effect.logWarning("oidc.discovery_failed", { provider: name, reason: error.message })
          )
        )
      }),
    { capacity: Math.max(1, byName.size), timeToLive: (exit) => (Exit.isSuccess(exit) ? DISCOVERY_TTL : 0) }
  )

  const redirectUri = (name: string) => `${publicUrl}/auth/${name}/callback`

  const begin = Effect.fn("OidcLogin.begin")(function* (name: string, redirect?: string) {
    yield* lookup(name)
    const configuration = yield* Cache.get(discoveries, name)
    const codeVerifier = Client.randomPKCECodeVerifier()
    const codeChallenge = yield* Effect.promise(() => Client.calculatePKCECodeChallenge(codeVerifier))
    const state = Client.randomState()
    const nonce = Client.randomNonce()
    const uri = redirect ?? redirectUri(name)
    const url = yield* Effect.try({
      try: () =>
        Client.buildAuthorizationUrl(configuration, {
          redirect_uri: uri,
          scope: SCOPE,
          code_challenge: codeChallenge,
          code_challenge_method: "S256",
          state,
          nonce
        }),
      catch: failed(name, "authorization request")
    })
    return { url: url.href, state, codeVerifier, nonce, redirectUri: uri }
  })

  const complete = Effect.fn("OidcLogin.complete")(function* (
    name: string,
    callbackUrl: URL,
    expected: OidcLoginExpected
  ) {
    yield* lookup(name)
    const configuration = yield* Cache.get(discoveries, name)
    // The token request must repeat the exact redirect_uri of the authorization
    // request, which openid-client takes from the URL it is given: rebuild it
    // from the expected one, as the URL the server saw may differ behind a proxy.
    const current = yield* Effect.try({
      try: () => new URL(expected.redirectUri),
      catch: failed(name, "callback")
    })
    current.search = callbackUrl.search
    current.hash = ""
    const tokens = yield* Effect.tryPromise({
      try: () =>
        Client.authorizationCodeGrant(configuration, current, {
          expectedState: expected.state,
          expectedNonce: expected.nonce,
          pkceCodeVerifier: expected.codeVerifier,
          idTokenExpected: true
        }),
      catch: failed(name, "callback")
    })
    // Present: with an expected nonce, openid-client fails a response without an ID token.
    const claims = tokens.claims()!
    let profile = decodeProfile(claims)
    const userinfoEndpoint = configuration.serverMetadata().userinfo_endpoint
    if (
      (Option.isNone(profile) || typeof profile.value.email !== "string") &&
      userinfoEndpoint !== undefined
    ) {
      const userinfo = yield* Effect.tryPromise({
        try: () => Client.fetchUserInfo(configuration, tokens.access_token, claims.sub),
        catch: failed(name, "userinfo")
      })
      profile = decodeProfile({ ...userinfo, name: userinfo.name ?? claims.name })
    }
    if (Option.isNone(profile)) {
      return yield* new OidcLoginFailed({
        provider: name,
        message: `Login with ${name} failed (profile): the provider sent malformed claims.`
      })
    }
    const { email, email_verified, name: displayName } = profile.value
    return {
      subject: claims.sub,
      issuer: claims.iss,
      email: email ?? null,
      emailVerified: typeof email === "string" && (email_verified === true || email_verified === "true"),
      name: displayName ?? null
    }
  })

  return OidcLogin.of({ providers: [...byName.keys()], redirectUri, begin, complete })
})
