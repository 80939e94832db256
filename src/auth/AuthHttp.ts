import { Effect, Layer, Option, Redacted } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { ServiceConfig } from "../Config.ts"
import { Forbidden, NotAuthenticated, Unauthorized } from "../domain/Errors.ts"
import {
  ApiKeyAuth,
  CookieAuth,
  CurrentAccount,
  CurrentPrincipal,
  KeyOrCookieAuth,
  CurrentUser,
  SESSION_COOKIE,
  sessionCookie
} from "./AuthMiddleware.ts"
import { bearerToken } from "./Credentials.ts"
import { Identity, WEB_SESSION_DAYS } from "./Identity.ts"

export const ApiKeyAuthLive = Layer.effect(
  ApiKeyAuth,
  Effect.gen(function* () {
    const identity = yield* Identity
    return ApiKeyAuth.of({
      bearer: Effect.fnUntraced(function* (httpEffect, { credential }) {
        const principal = yield* identity.authenticateKey(Redacted.value(credential))
        if (Option.isNone(principal)) return yield* new Unauthorized()
        return yield* Effect.provideService(httpEffect, CurrentPrincipal, principal.value)
      })
    })
  })
)

export const CookieAuthLive = Layer.effect(
  CookieAuth,
  Effect.gen(function* () {
    const identity = yield* Identity
    return CookieAuth.of({
      cookie: Effect.fnUntraced(function* (httpEffect, { credential }) {
        const user = yield* identity.userForSessionToken(Redacted.value(credential))
        if (Option.isSome(user)) return yield* Effect.provideService(httpEffect, CurrentUser, user.value)
        // Authenticated with a key, but key management is cookie-only.
        const request = yield* HttpServerRequest.HttpServerRequest
        const token = bearerToken(request)
        if (token !== undefined && Option.isSome(yield* identity.authenticateKey(token))) {
          return yield* new Forbidden()
        }
        return yield* new NotAuthenticated()
      })
    })
  })
)

export const KeyOrCookieAuthLive = Layer.effect(
  KeyOrCookieAuth,
  Effect.gen(function* () {
    const identity = yield* Identity
    return KeyOrCookieAuth.of({
      bearer: Effect.fnUntraced(function* (httpEffect, { credential }) {
        const principal = yield* identity.authenticateKey(Redacted.value(credential))
        if (Option.isNone(principal)) return yield* new Unauthorized()
        const { accountId, userId, apiKeyId } = principal.value
        return yield* Effect.provideService(httpEffect, CurrentAccount, { accountId, userId, apiKeyId })
      }),
      cookie: Effect.fnUntraced(function* (httpEffect, { credential }) {
        const user = yield* identity.userForSessionToken(Redacted.value(credential))
        if (Option.isNone(user)) {
          // Tried last: a caller who sent a key hears about the key, not the cookie.
          const request = yield* HttpServerRequest.HttpServerRequest
          return yield* bearerToken(request) === undefined ? new NotAuthenticated() : new Unauthorized()
        }
        const accountId = yield* identity.personalAccountId(user.value)
        return yield* httpEffect.pipe(
          Effect.provideService(CurrentAccount, { accountId, userId: user.value.id, apiKeyId: null }),
          Effect.provideService(CurrentUser, user.value)
        )
      })
    })
  })
)

export const AuthHttp = HttpApiBuilder.group(
  Api,
  "auth",
  Effect.fn(function* (handlers) {
    const identity = yield* Identity
    const config = yield* ServiceConfig
    const cookieOptions = {
      secure: config.secureCookies,
      httpOnly: true,
      sameSite: "lax",
      path: "/"
    } as const

    return handlers
      .handle("register", ({ payload }) => Effect.map(identity.register(payload), (user) => ({ user })))
      .handle("login", ({ payload }) =>
        Effect.gen(function* () {
          const { user, token } = yield* identity.login(payload)
          yield* HttpApiBuilder.securitySetCookie(sessionCookie, token, {
            ...cookieOptions,
            maxAge: `${WEB_SESSION_DAYS} days`
          })
          return { user }
        })
      )
      .handle("logout", ({ request }) =>
        Effect.gen(function* () {
          const token = request.cookies[SESSION_COOKIE]
          if (token !== undefined) yield* identity.logout(token)
          yield* HttpEffect.appendPreResponseHandler((_request, response) =>
            Effect.orDie(HttpServerResponse.expireCookie(response, SESSION_COOKIE, cookieOptions))
          )
        })
      )
      .handle("me", () =>
        Effect.gen(function* () {
          const user = yield* CurrentUser
          return { user, accounts: yield* identity.accounts(user) }
        })
      )
  })
)

export const KeysHttp = HttpApiBuilder.group(
  Api,
  "keys",
  Effect.fn(function* (handlers) {
    const identity = yield* Identity
    return handlers
      .handle("create", ({ payload }) =>
        Effect.flatMap(CurrentUser, (user) => identity.createKey(user, payload))
      )
      .handle("list", () =>
        Effect.flatMap(CurrentUser, (user) => Effect.map(identity.listKeys(user), (keys) => ({ keys })))
      )
  })
)

/** The auth middleware implementations every group's routes need. */
export const middleware = Layer.mergeAll(ApiKeyAuthLive, CookieAuthLive, KeyOrCookieAuthLive)

export const layer = Layer.mergeAll(AuthHttp, KeysHttp)
