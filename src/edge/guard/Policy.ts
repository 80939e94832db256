import { Cause, Context, Effect, Layer, Option, Predicate } from "effect"
import { type Access, RequiredAccess } from "../../features/policy/Access.ts"
import { Audit } from "../../features/audit/Audit.ts"
import {
  PerAccountRateLimit,
  PerPrincipalRateLimit,
  PerSessionRateLimit
} from "../../features/limits/LimitsMiddleware.ts"
import { type RateLimitName, RateLimits } from "../../features/limits/RateLimits.ts"
import type { Forbidden, RateLimited } from "../../kernel/Errors.ts"
import { type Owner, principalKey } from "../../kernel/Owner.ts"
import { Authenticator } from "./Authenticator.ts"

/** The rate limit a route spends, and whose budget: the caller's, its account's, or a session's of it. */
export interface RouteLimit {
  readonly name: RateLimitName
  readonly per: "principal" | "account" | "session"
}

/** What a route requires of a caller, as its endpoint's annotations declare it. */
export interface RouteRules {
  readonly access: Access
  readonly limit: RouteLimit | undefined
}

/** The rate limit an endpoint's annotations name, if any (per principal, else account, else session). */
export const limitOf = (annotations: Context.Context<never>): RouteLimit | undefined => {
  const perPrincipal = Context.getOption(annotations, PerPrincipalRateLimit)
  if (Option.isSome(perPrincipal)) return { name: perPrincipal.value, per: "principal" }
  const perAccount = Context.getOption(annotations, PerAccountRateLimit)
  if (Option.isSome(perAccount)) return { name: perAccount.value, per: "account" }
  const perSession = Context.getOption(annotations, PerSessionRateLimit)
  return Option.isSome(perSession) ? { name: perSession.value, per: "session" } : undefined
}

/** An endpoint's rules; `None` when it does not say what it requires (such a route is refused). */
export const rulesOf = (annotations: Context.Context<never>): Option.Option<RouteRules> =>
  Option.map(Context.getOption(annotations, RequiredAccess), (access) => ({
    access,
    limit: limitOf(annotations)
  }))

/** The `code` an API error answers with; `internal_error` for a defect. */
const codeOf = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.findErrorOption(cause)
  if (Option.isNone(error)) return "internal_error"
  const code = Predicate.hasProperty(error.value, "code") ? error.value.code : undefined
  return typeof code === "string" ? code : "invalid_request"
}

/**
 * The rules every transport applies to a call of a use case, the same way:
 * the HTTP routes (`Authorize`, `RouteRateLimit`), the MCP tools, the PTY
 * (`callerRaw`, then `admit`) and, for `spend` alone, the other raw routes
 * (which check their access with `authorizeRaw` or `cdpCaller`, so their
 * refusals are not audited). `admit` checks the
 * caller's access and records a refused or failed mutation in the audit
 * trail under the route's action (a success is the use case's own record,
 * written in its transaction, which a failure rolled back); `spend` takes
 * one from the route's rate limit.
 */
export class Policy extends Context.Service<
  Policy,
  {
    readonly admit: <A, E, R>(
      owner: Owner,
      access: Access,
      /** The audited target's id (the path parameter the route's `audits` names). */
      targetId: string | undefined,
      effect: Effect.Effect<A, E, R>
    ) => Effect.Effect<A, E | Forbidden, R>
    readonly spend: (
      owner: Owner,
      limit: RouteLimit | undefined,
      /** The session a per-session limit is keyed by. */
      sessionId: string | undefined
    ) => Effect.Effect<void, RateLimited>
  }
>()("rbs/guard/Policy") {
  static readonly layer = Layer.effect(
    Policy,
    Effect.gen(function* () {
      const authenticator = yield* Authenticator
      const audit = yield* Audit
      const limits = yield* RateLimits

      const admit = <A, E, R>(
        owner: Owner,
        access: Access,
        targetId: string | undefined,
        effect: Effect.Effect<A, E, R>
      ): Effect.Effect<A, E | Forbidden, R> => {
        const audited = access.audit
        if (audited === null) return Effect.andThen(authenticator.check(owner, access), effect)
        const recordFailure = (cause: Cause.Cause<unknown>) =>
          Cause.hasInterruptsOnly(cause)
            ? Effect.void
            : audit.record(owner, {
                action: audited.action,
                targetType: audited.targetType,
                targetId: targetId?.slice(0, 200) ?? null,
                outcome: "failure",
                details: { code: codeOf(cause) }
              })
        return Effect.andThen(authenticator.check(owner, access), effect).pipe(Effect.tapCause(recordFailure))
      }

      const spend = (owner: Owner, limit: RouteLimit | undefined, sessionId: string | undefined) => {
        if (limit === undefined) return Effect.void
        switch (limit.per) {
          case "principal":
            return limits.consume(limit.name, `${owner.accountId}:${principalKey(owner.principal)}`)
          case "account":
            return limits.consume(limit.name, owner.accountId)
          case "session":
            return limits.consume(limit.name, `${owner.accountId}:${sessionId ?? ""}`)
        }
      }

      return Policy.of({ admit, spend })
    })
  )
}
