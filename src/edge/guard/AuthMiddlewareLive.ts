import { Context, Effect, Layer, Option, Redacted } from "effect"
import { ACCOUNT_ID, sessionAttributes } from "../../platform/observability/Tracing.ts"
import { HttpRouter, HttpServerRequest } from "effect/http"
import { Forbidden, Unauthorized } from "../../kernel/Errors.ts"
import type { Principal } from "../../kernel/Owner.ts"
import { RequiredAccess } from "../../features/policy/Access.ts"
import {
  Authenticate,
  Authorize,
  CurrentOrigin,
  CurrentOwner,
  CurrentPrincipal
} from "../../features/policy/AuthMiddleware.ts"
import { refuseImpossibleInput, refuseUnnamable } from "./InputGuard.ts"
import { Policy } from "./Policy.ts"
import { ACCOUNT_HEADER, Authenticator, originOf } from "./Authenticator.ts"

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
        Effect.flatMap(authenticator.bearer(Redacted.value(credential)), (principal) =>
          withPrincipal(httpEffect, principal)
        ),
      cookie: (httpEffect, { credential }) =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          // A caller who sent a bearer credential hears about that one, not the cookie.
          if (request.headers.authorization !== undefined) return yield* new Unauthorized()
          return yield* withPrincipal(httpEffect, yield* authenticator.cookie(Redacted.value(credential)))
        })
    })
  })
)

export const AuthorizeLive = Layer.effect(
  Authorize,
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const policy = yield* Policy
    return Authorize.of((httpEffect, { endpoint, group }) =>
      Effect.gen(function* () {
        const access = Context.getOption(
          Context.merge(group.annotations, endpoint.annotations),
          RequiredAccess
        )
        // A route without its requirement written down is refused, not opened.
        if (Option.isNone(access)) return yield* new Forbidden()
        const unnamable = yield* refuseUnnamable(endpoint)
        if (Option.isSome(unnamable)) return unnamable.value
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
        const targetParam = access.value.audit?.targetParam ?? null
        const target =
          Option.isNone(route) || targetParam === null ? undefined : route.value.params[targetParam]
        // Input no route can use is answered once the caller is let in, before the route runs.
        return yield* policy.admit(
          owner,
          access.value,
          target,
          Effect.flatMap(refuseImpossibleInput(endpoint), (refused) =>
            Option.isSome(refused)
              ? Effect.succeed(refused.value)
              : Effect.provideService(httpEffect, CurrentOwner, owner)
          )
        )
      })
    )
  })
)

/** The middleware; `Authenticator` comes from the core (the CDP relay uses it too). */
export const layer = Layer.mergeAll(AuthenticateLive, AuthorizeLive)
