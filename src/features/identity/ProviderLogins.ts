import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Audit } from "../audit/Audit.ts"
import type { User } from "../../kernel/Identity.ts"
import { LoginFailed, LoginProviderNotFound } from "../../kernel/IdentityErrors.ts"
import { AccountsRepo } from "./AccountsRepo.ts"
import { OidcLogin } from "./OidcLogin.ts"
import * as Tokens from "./Tokens.ts"
import { Users } from "./Users.ts"
import * as Sql from "../../platform/db/Sql.ts"

/** How long a login may stay at the provider. */
export const LOGIN_TTL_MS = 10 * 60_000

/** Holds a login's state in the browser that began it, for its callback path only. */
export const LOGIN_STATE_COOKIE = "rbs_login_state"

const Pending = Schema.Struct({
  provider: Schema.String,
  code_verifier: Schema.String,
  nonce: Schema.String,
  redirect_uri: Schema.String,
  return_to: Schema.NullOr(Schema.String),
  created_at: Schema.Date
})

/** A path on this service (never another origin) to send the browser to after login. */
export const safeReturnTo = (value: string | undefined): string | null =>
  value !== undefined && /^\/(?![/\\])[\x21-\x7e]*$/.test(value) && value.length <= 2048 ? value : null

/** A flow begun at a provider, as kept server-side until its callback. */
export interface PendingFlow {
  readonly code_verifier: string
  readonly nonce: string
  readonly redirect_uri: string
}

/**
 * Redeems a provider's callback for the flow `pending` began (the code with
 * its PKCE verifier, the ID token checked): the identity, or `LoginFailed`
 * (logged with the reason, which the caller never sees).
 */
export const redeem = (
  oidc: OidcLogin["Service"],
  provider: string,
  callbackUrl: URL,
  state: string,
  pending: PendingFlow
) =>
  oidc
    .complete(provider, callbackUrl, {
      state,
      codeVerifier: pending.code_verifier,
      nonce: pending.nonce,
      redirectUri: pending.redirect_uri
    })
    .pipe(
      Effect.catchTag("OidcUnknownProvider", () => Effect.fail(new LoginProviderNotFound())),
      Effect.catchTag("OidcLoginFailed", (error) =>
        Effect.logWarning("auth.provider_login_failed", { provider, error: error.message }).pipe(
          Effect.andThen(Effect.fail(new LoginFailed()))
        )
      )
    )

/**
 * Login through an OpenID Connect provider: `begin` keeps the state, PKCE
 * verifier and nonce server-side (one use, ten minutes) and answers the
 * provider's URL; `finish` checks the callback against them and gives the
 * user (found by their provider identity, linked by verified email, or new)
 * a dashboard session.
 */
export class ProviderLogins extends Context.Service<
  ProviderLogins,
  {
    readonly providers: ReadonlyArray<string>
    /** The provider's URL, and the state the browser keeps in a cookie until the callback. */
    readonly begin: (
      provider: string,
      returnTo: string | undefined
    ) => Effect.Effect<{ readonly url: string; readonly state: string }, LoginProviderNotFound | LoginFailed>
    /** `browserState`: the state cookie of the browser that brought the callback. */
    readonly finish: (
      provider: string,
      callbackUrl: URL,
      browserState: string | undefined
    ) => Effect.Effect<
      { readonly user: User; readonly token: string; readonly returnTo: string | null },
      LoginProviderNotFound | LoginFailed
    >
  }
>()("rbs/auth/ProviderLogins") {
  static readonly layer = Layer.effect(
    ProviderLogins,
    Effect.gen(function* () {
      const oidc = yield* OidcLogin
      const users = yield* Users
      const accounts = yield* AccountsRepo
      const audit = yield* Audit
      const sql = yield* SqlClient.SqlClient
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const known = (provider: string) =>
        oidc.providers.includes(provider) ? Effect.void : Effect.fail(new LoginProviderNotFound())

      const failed = (provider: string) => (error: { readonly message: string }) =>
        Effect.logWarning("auth.provider_login_failed", { provider, error: error.message }).pipe(
          Effect.andThen(Effect.fail(new LoginFailed()))
        )

      const begin = Effect.fn("ProviderLogins.begin")(function* (
        provider: string,
        returnTo: string | undefined
      ) {
        yield* known(provider)
        const start = yield* oidc.begin(provider).pipe(
          Effect.catchTag("OidcUnknownProvider", () => Effect.fail(new LoginProviderNotFound())),
          Effect.catchTag("OidcLoginFailed", failed(provider))
        )
        const at = yield* now
        yield* sql`
          INSERT INTO oidc_logins (state, provider, code_verifier, nonce, redirect_uri, return_to, created_at)
          VALUES (${start.state}, ${provider}, ${start.codeVerifier}, ${start.nonce}, ${start.redirectUri},
            ${safeReturnTo(returnTo)}, ${at})`.pipe(Sql.orDefect)
        // Logins abandoned at the provider are swept as new ones start.
        yield* sql`DELETE FROM oidc_logins WHERE created_at < ${new Date(at.getTime() - LOGIN_TTL_MS)}`.pipe(
          Sql.orDefect
        )
        return { url: start.url, state: start.state }
      })

      const finish = Effect.fn("ProviderLogins.finish")(function* (
        provider: string,
        callbackUrl: URL,
        browserState: string | undefined
      ) {
        yield* known(provider)
        const state = callbackUrl.searchParams.get("state") ?? ""
        // The callback must come back to the browser that began the login, or
        // someone could log a victim into the attacker's account (login CSRF).
        if (browserState === undefined || !Tokens.equalStrings(browserState, state)) {
          return yield* new LoginFailed()
        }
        // One use: the row is taken whatever happens next.
        const rows = yield* sql`
          DELETE FROM oidc_logins WHERE state = ${state} AND provider = ${provider}
          RETURNING provider, code_verifier, nonce, redirect_uri, return_to, created_at`.pipe(
          Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(Pending))),
          Sql.orDefect
        )
        const pending = rows[0]
        const at = yield* now
        if (pending === undefined || at.getTime() - pending.created_at.getTime() > LOGIN_TTL_MS) {
          return yield* new LoginFailed()
        }
        const identity = yield* redeem(oidc, provider, callbackUrl, state, pending)
        const user = yield* users
          .fromIdentity({
            provider,
            subject: identity.subject,
            email: identity.email,
            emailVerified: identity.emailVerified,
            name: identity.name
          })
          .pipe(Effect.catchTag("InvalidField", () => failed(provider)({ message: "no verified email" })))
        const token = yield* users.openSession(user)
        const accountId = yield* accounts.personalAccountId(user.id)
        yield* audit.record(
          {
            accountId,
            role: "owner",
            principal: { _tag: "User", userId: user.id, via: "cookie", tokenAccountId: null }
          },
          { action: "user.logged_in", targetType: "user", targetId: user.id, details: { provider } }
        )
        return { user, token, returnTo: pending.return_to }
      })

      return ProviderLogins.of({ providers: oidc.providers, begin, finish })
    })
  )
}
