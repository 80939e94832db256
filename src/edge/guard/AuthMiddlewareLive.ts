import { Cause, Context, Effect, Layer, Option, Predicate, Redacted } from "effect"
import { PrincipalResolvers } from "../../features/policy/PrincipalResolvers.ts"
import { ACCOUNT_ID, sessionAttributes } from "../../platform/observability/Tracing.ts"
import { HttpRouter, HttpServerRequest } from "effect/http"
import { Accounts } from "../../features/identity/Accounts.ts"
import { Audit } from "../../features/audit/Audit.ts"
import { Forbidden, Unauthorized } from "../../kernel/Errors.ts"
import type { AccountNotFound } from "../../kernel/IdentityErrors.ts"
import { type Owner, permits, type Principal } from "../../kernel/Owner.ts"
import { type Access, RequiredAccess, takes } from "../../features/policy/Access.ts"
import { AccessTokens, looksLikeJwt } from "../../features/identity/AccessTokens.ts"
import { ApiKeys } from "../../features/identity/ApiKeys.ts"
import {
  Authenticate,
  Authorize,
  CurrentOrigin,
  CurrentOwner,
  CurrentPrincipal,
  CurrentVouched,
  type RequestOrigin
} from "../../features/policy/AuthMiddleware.ts"
import { Users } from "../../features/identity/Users.ts"
import { refuseImpossibleInput } from "./InputGuard.ts"

export const ACCOUNT_HEADER = "x-service-account"

/** Where the request came from, for the audit trail. */
export const originOf = (request: HttpServerRequest.HttpServerRequest): RequestOrigin => ({
  ip: Option.getOrNull(request.remoteAddress),
  userAgent: request.headers["user-agent"]?.slice(0, 512) ?? null
})

/**
 * Who a credential is: an API key, an access token (a JWT from `POST
 * /auth/token`) or a dashboard session token. `None` for anything that does
 * not authenticate now.
 */
export class Authenticator extends Context.Service<
  Authenticator,
  {
    readonly bearer: (token: string) => Effect.Effect<Option.Option<Principal>>
    readonly cookie: (token: string) => Effect.Effect<Option.Option<Principal>>
    /** The active account and the caller's role there (`X-Service-Account`). */
    readonly resolve: (
      principal: Principal,
      selector: string | undefined
    ) => Effect.Effect<Owner, Forbidden | AccountNotFound>
    /** Whether a route lets the caller in, in the account `resolve` chose. */
    readonly check: (owner: Owner, access: Access) => Effect.Effect<void, Forbidden>
    /** `resolve`, then `check`. */
    readonly authorize: (
      principal: Principal,
      access: Access,
      selector: string | undefined
    ) => Effect.Effect<Owner, Forbidden | AccountNotFound>
  }
>()("rbs/auth/Authenticator") {
  static readonly layer = Layer.effect(
    Authenticator,
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      const users = yield* Users
      const tokens = yield* AccessTokens
      const accounts = yield* Accounts
      // Token kinds other features issue (an assistant runtime's), first.
      const resolvers = yield* PrincipalResolvers

      const bearer = (token: string) =>
        resolvers.find((resolver) => resolver.accepts(token))?.resolve(token) ??
        (looksLikeJwt(token)
          ? Effect.gen(function* () {
              const claims = yield* tokens.verify(token)
              if (Option.isNone(claims)) return Option.none<Principal>()
              const user = yield* users.findById(claims.value.userId)
              // "Log out everywhere" ends the tokens issued before it.
              const validAfter = Option.flatMapNullishOr(user, (record) => record.tokensValidAfter)
              if (
                Option.isNone(user) ||
                (Option.isSome(validAfter) && claims.value.issuedAt.getTime() < validAfter.value.getTime())
              ) {
                return Option.none<Principal>()
              }
              return Option.some<Principal>({
                _tag: "User",
                userId: claims.value.userId,
                via: "token",
                tokenAccountId: claims.value.accountId
              })
            })
          : keys.authenticate(token))

      const cookie = (token: string) =>
        Effect.map(
          users.userForSessionToken(token),
          Option.map((user): Principal => ({
            _tag: "User",
            userId: user.id,
            via: "cookie",
            tokenAccountId: null
          }))
        )

      const resolve = (principal: Principal, selector: string | undefined) =>
        Effect.map(accounts.resolve(principal, selector), (active): Owner => ({
          accountId: active.accountId,
          principal,
          role: active.role
        }))

      const check = (owner: Owner, access: Access) =>
        takes(access.credentials, owner.principal) &&
        // A runtime holds no permission: a route that takes its token lets it in by that alone (and
        // the route keeps it to its own assistant).
        (access.permission === null ||
          owner.principal._tag === "Assistant" ||
          permits(owner, access.permission))
          ? Effect.void
          : Effect.fail(new Forbidden())

      const authorize = Effect.fn("Authenticator.authorize")(function* (
        principal: Principal,
        access: Access,
        selector: string | undefined
      ) {
        const owner = yield* resolve(principal, selector)
        yield* check(owner, access)
        return owner
      })

      return Authenticator.of({ bearer, cookie, resolve, check, authorize })
    })
  )
}

/** The principal this process already proved `credential` to be, else `authenticate`'s answer. */
const vouchedOr = (
  credential: string,
  authenticate: (credential: string) => Effect.Effect<Option.Option<Principal>>
) =>
  Effect.flatMap(Effect.service(CurrentVouched), (vouched) =>
    vouched !== undefined && vouched.credential === credential
      ? Effect.succeed(Option.some(vouched.principal))
      : authenticate(credential)
  )

export const AuthenticateLive = Layer.effect(
  Authenticate,
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const withPrincipal = <A, E, R>(
      httpEffect: Effect.Effect<A, E, R>,
      principal: Option.Option<Principal>
    ) =>
      Effect.gen(function* () {
        if (Option.isNone(principal)) return yield* new Unauthorized()
        const request = yield* HttpServerRequest.HttpServerRequest
        return yield* httpEffect.pipe(
          Effect.provideService(CurrentPrincipal, principal.value),
          Effect.provideService(CurrentOrigin, originOf(request))
        )
      })
    return Authenticate.of({
      // Tried first; with no Authorization header it fails and the cookie is tried.
      bearer: (httpEffect, { credential }) =>
        Effect.flatMap(vouchedOr(Redacted.value(credential), authenticator.bearer), (principal) =>
          withPrincipal(httpEffect, principal)
        ),
      cookie: (httpEffect, { credential }) =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          // A caller who sent a bearer credential hears about that one, not the cookie.
          if (request.headers.authorization !== undefined) return yield* new Unauthorized()
          return yield* withPrincipal(
            httpEffect,
            yield* vouchedOr(Redacted.value(credential), authenticator.cookie)
          )
        })
    })
  })
)

/** The `code` an API error answers with; `internal_error` for a defect. */
const codeOf = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.findErrorOption(cause)
  if (Option.isNone(error)) return "internal_error"
  const code = Predicate.hasProperty(error.value, "code") ? error.value.code : undefined
  return typeof code === "string" ? code : "invalid_request"
}

export const AuthorizeLive = Layer.effect(
  Authorize,
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const audit = yield* Audit
    return Authorize.of((httpEffect, { endpoint, group }) =>
      Effect.gen(function* () {
        const access = Context.getOption(
          Context.merge(group.annotations, endpoint.annotations),
          RequiredAccess
        )
        // A route without its requirement written down is refused, not opened.
        if (Option.isNone(access)) return yield* new Forbidden()
        const principal = yield* CurrentPrincipal
        const request = yield* HttpServerRequest.HttpServerRequest
        const owner = yield* authenticator.resolve(principal, request.headers[ACCOUNT_HEADER])
        // The request's span says whose it is, and which session a session route is about.
        const route = yield* Effect.serviceOption(HttpRouter.RouteContext)
        const sessionId = Option.isSome(route) ? route.value.params.id : undefined
        yield* Effect.annotateCurrentSpan(
          sessionId !== undefined && sessionId.startsWith("sess_")
            ? sessionAttributes(sessionId, owner.accountId)
            : { [ACCOUNT_ID]: owner.accountId }
        )
        const audited = access.value.audit
        // Input no route can use is answered once the caller is let in, before the route runs.
        const guarded = Effect.flatMap(refuseImpossibleInput(endpoint), (refused) =>
          Option.isSome(refused)
            ? Effect.succeed(refused.value)
            : Effect.provideService(httpEffect, CurrentOwner, owner)
        )
        if (audited === null) {
          yield* authenticator.check(owner, access.value)
          return yield* guarded
        }
        // A refused or failed mutation is recorded too: the service records
        // successes in their transaction, which a failure rolled back.
        const params = yield* Effect.serviceOption(HttpRouter.RouteContext)
        const target = Option.match(params, {
          onNone: () => undefined,
          onSome: (route) => (audited.targetParam === null ? undefined : route.params[audited.targetParam])
        })
        const recordFailure = (cause: Cause.Cause<unknown>) =>
          Cause.hasInterruptsOnly(cause)
            ? Effect.void
            : audit.record(owner, {
                action: audited.action,
                targetType: audited.targetType,
                targetId: target?.slice(0, 200) ?? null,
                outcome: "failure",
                details: { code: codeOf(cause) }
              })
        yield* authenticator.check(owner, access.value).pipe(Effect.tapCause(recordFailure))
        const refused = yield* refuseImpossibleInput(endpoint)
        if (Option.isSome(refused)) return refused.value
        return yield* Effect.provideService(httpEffect, CurrentOwner, owner).pipe(
          Effect.tapCause(recordFailure)
        )
      })
    )
  })
)

/** The middleware; `Authenticator` comes from the core (the CDP relay uses it too). */
export const layer = Layer.mergeAll(AuthenticateLive, AuthorizeLive)
