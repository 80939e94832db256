import { Clock, Effect, Layer, Option } from "effect"
import { HttpEffect, HttpServerResponse } from "effect/http"
import * as Crypto from "node:crypto"
import { HttpApiBuilder } from "effect/http-api"
import { Accounts } from "../../features/identity/Accounts.ts"
import { Audit } from "../../features/audit/Audit.ts"
import { Api } from "./Api.ts"
import { PublicUrls } from "../../platform/config/Config.ts"
import { AccessTokens } from "../../features/identity/AccessTokens.ts"
import {
  CurrentOrigin,
  CurrentOwner,
  CurrentPrincipal,
  SESSION_COOKIE,
  sessionCookie
} from "../../features/policy/AuthMiddleware.ts"
import { Authenticator, originOf } from "../guard/Authenticator.ts"
import { access } from "../../features/policy/Access.ts"
import { AssistantLinks } from "../../features/assistants/AssistantLinks.ts"
import { authorizeRaw } from "../guard/RawAuth.ts"
import { LoginProviderNotFound } from "../../kernel/IdentityErrors.ts"
import { KeysHttp } from "./KeysHttp.ts"
import { LOGIN_STATE_COOKIE, LOGIN_TTL_MS, ProviderLogins } from "../../features/identity/ProviderLogins.ts"
import { Users, WEB_SESSION_DAYS } from "../../features/identity/Users.ts"

/** The cookie's attributes; `Secure` when clients reach the service over https. */
export const cookieOptions = Effect.map(Effect.service(PublicUrls), (config) => ({
  secure: config.secureCookies,
  httpOnly: true,
  sameSite: "lax" as const,
  path: "/"
}))

/** Sets the dashboard cookie for a new session token. */
export const setSessionCookie = (token: string) =>
  Effect.gen(function* () {
    const options = yield* cookieOptions
    yield* HttpApiBuilder.securitySetCookie(sessionCookie, token, {
      ...options,
      maxAge: `${WEB_SESSION_DAYS} days`
    })
  })

export const AuthHttp = HttpApiBuilder.group(
  Api,
  "auth",
  Effect.fn(function* (handlers) {
    const users = yield* Users
    const config = yield* PublicUrls
    const options = yield* cookieOptions.pipe(Effect.provideService(PublicUrls, config))

    return handlers
      .handle("register", ({ payload, request }) =>
        users.register(payload, { ip: Option.getOrNull(request.remoteAddress) }).pipe(
          // Answered as a new user is, after the same work: whoever registered the email is
          // unchanged, and this password does not log in to it. The user answered is no one's.
          Effect.catchTag("EmailTaken", (taken) =>
            Effect.map(Clock.currentTimeMillis, (now) => ({
              id: Crypto.randomUUID(),
              email: taken.email,
              created_at: new Date(now)
            }))
          ),
          Effect.map((user) => ({ user })),
          Effect.provideService(CurrentOrigin, originOf(request))
        )
      )
      .handle("login", ({ payload, request }) =>
        Effect.gen(function* () {
          const { user, token } = yield* users
            .login(payload, Option.getOrNull(request.remoteAddress))
            .pipe(Effect.provideService(CurrentOrigin, originOf(request)))
          yield* setSessionCookie(token).pipe(Effect.provideService(PublicUrls, config))
          return { user }
        })
      )
      .handle("logout", ({ request }) =>
        Effect.gen(function* () {
          const token = request.cookies[SESSION_COOKIE]
          if (token !== undefined) yield* users.logout(token)
          yield* HttpEffect.appendPreResponseHandler((_request, response) =>
            Effect.orDie(HttpServerResponse.expireCookie(response, SESSION_COOKIE, options))
          )
        })
      )
  })
)

export const SessionAuthHttp = HttpApiBuilder.group(
  Api,
  "sessionAuth",
  Effect.fn(function* (handlers) {
    const users = yield* Users
    const accounts = yield* Accounts
    const tokens = yield* AccessTokens
    const audit = yield* Audit

    const currentUser = Effect.gen(function* () {
      const principal = yield* CurrentPrincipal
      if (principal._tag !== "User") return yield* Effect.die(new Error("a user route without a user"))
      const record = yield* users.findById(principal.userId)
      if (Option.isNone(record)) return yield* Effect.die(new Error(`user ${principal.userId} vanished`))
      return { principal, user: record.value.user }
    })

    return handlers
      .handle("me", () =>
        Effect.gen(function* () {
          const { principal, user } = yield* currentUser
          return { user, accounts: yield* accounts.list(principal) }
        })
      )
      .handle("logoutEverywhere", () =>
        Effect.gen(function* () {
          const { user } = yield* currentUser
          yield* users.logoutEverywhere(yield* CurrentOwner, user.id)
        })
      )
      .handle("token", () =>
        Effect.gen(function* () {
          const { user } = yield* currentUser
          const owner = yield* CurrentOwner
          const minted = yield* tokens.mint({ userId: user.id, accountId: owner.accountId })
          yield* audit.record(owner, {
            action: "access_token.issued",
            targetType: "user",
            targetId: user.id,
            details: { expires_at: minted.expiresAt.toISOString() }
          })
          return {
            access_token: minted.token,
            token_type: "Bearer" as const,
            expires_in: Math.round((minted.expiresAt.getTime() - (yield* Clock.currentTimeMillis)) / 1000),
            expires_at: minted.expiresAt,
            account_id: owner.accountId
          }
        })
      )
  })
)

export const ProviderLoginHttp = HttpApiBuilder.group(
  Api,
  "providerLogin",
  Effect.fn(function* (handlers) {
    const logins = yield* ProviderLogins
    const links = yield* AssistantLinks
    const authenticator = yield* Authenticator
    const config = yield* PublicUrls
    const options = yield* cookieOptions.pipe(Effect.provideService(PublicUrls, config))
    return handlers
      .handle("providers", () =>
        Effect.succeed({
          providers: logins.providers
            .filter((name) => !links.isAssistantIdp(name))
            .map((name) => ({
              name,
              login_url: `${config.publicUrl}/auth/${name}/login`
            }))
        })
      )
      .handleRaw("login", ({ params, query }) =>
        Effect.flatMap(
          // The assistant sign-in's provider links people to assistants; nobody logs in with it.
          links.isAssistantIdp(params.provider)
            ? Effect.fail(new LoginProviderNotFound())
            : logins.begin(params.provider, query.return_to),
          ({ url, state }) =>
            HttpServerResponse.setCookie(
              HttpServerResponse.redirect(url, { status: 302, headers: { "cache-control": "no-store" } }),
              LOGIN_STATE_COOKIE,
              state,
              { ...options, path: `/auth/${params.provider}/callback`, maxAge: `${LOGIN_TTL_MS} millis` }
            ).pipe(Effect.orDie)
        )
      )
      .handle("assistantLoginUrl", ({ params, query, request }) =>
        Effect.gen(function* () {
          const owner = yield* authorizeRaw(
            request,
            access("sessions.write", "any-or-assistant"),
            new URL(config.publicUrl).origin
          ).pipe(Effect.provideService(Authenticator, authenticator))
          const started = yield* links.loginUrl(owner, params.provider, query.assistant_id)
          return {
            object: "assistant_login_url" as const,
            assistant_id: query.assistant_id,
            provider: params.provider,
            url: started.url,
            expires_at: started.expiresAt
          }
        })
      )
      .handle("assistantCallback", ({ params, payload }) => {
        // The form's fields where openid-client reads a callback's: the query of our callback URL.
        const url = new URL(`/auth/${params.provider}/callback`, config.publicUrl)
        for (const [name, value] of Object.entries(payload))
          if (typeof value === "string") url.searchParams.set(name, value)
        return links.complete(params.provider, url)
      })
      .handleRaw("callback", ({ params, request }) =>
        Effect.gen(function* () {
          // The provider's parameters on our own callback URL (the path is ours, the query theirs).
          const url = new URL(request.url, config.publicUrl)
          if (links.isAssistantIdp(params.provider)) {
            const link = yield* links.complete(params.provider, url)
            return yield* HttpServerResponse.json({
              ...link,
              created_at: link.created_at.toISOString()
            }).pipe(Effect.orDie)
          }
          const { user, token, returnTo } = yield* logins
            .finish(params.provider, url, request.cookies[LOGIN_STATE_COOKIE])
            .pipe(Effect.provideService(CurrentOrigin, originOf(request)))
          const response =
            returnTo === null
              ? yield* HttpServerResponse.json({
                  user: { ...user, created_at: user.created_at.toISOString() }
                }).pipe(Effect.orDie)
              : HttpServerResponse.redirect(returnTo, { status: 303 })
          return yield* HttpServerResponse.setCookie(response, SESSION_COOKIE, token, {
            ...options,
            maxAge: `${WEB_SESSION_DAYS} days`
          }).pipe(
            Effect.flatMap((withSession) =>
              HttpServerResponse.expireCookie(withSession, LOGIN_STATE_COOKIE, {
                ...options,
                path: `/auth/${params.provider}/callback`
              })
            ),
            Effect.orDie
          )
        })
      )
  })
)

export const layer = Layer.mergeAll(AuthHttp, SessionAuthHttp, ProviderLoginHttp, KeysHttp)
