import { Context, Effect, Layer, Option } from "effect"
import { HttpServerRequest } from "effect/http"
import { PrincipalResolvers } from "../../features/policy/PrincipalResolvers.ts"
import { Accounts } from "../../features/identity/Accounts.ts"
import { Forbidden } from "../../kernel/Errors.ts"
import type { AccountNotFound } from "../../kernel/IdentityErrors.ts"
import { type Owner, permits, type Principal } from "../../kernel/Owner.ts"
import { type Access, takes } from "../../features/policy/Access.ts"
import { AccessTokens, looksLikeJwt } from "../../features/identity/AccessTokens.ts"
import { ApiKeys } from "../../features/identity/ApiKeys.ts"
import type { RequestOrigin } from "../../features/policy/AuthMiddleware.ts"
import { Users } from "../../features/identity/Users.ts"

export const ACCOUNT_HEADER = "x-service-account"

/** Where the request came from, for the audit trail. */
export const originOf = (request: HttpServerRequest.HttpServerRequest): RequestOrigin => ({
  ip: Option.getOrNull(request.remoteAddress),
  userAgent: request.headers["user-agent"]?.slice(0, 512) ?? null
})

/**
 * A principal named by a credential the service minted for it (a session's
 * connect token): a key by its id, a user as they authenticated.
 */
export type PrincipalRef =
  { readonly _tag: "ApiKey"; readonly keyId: string } | Extract<Principal, { readonly _tag: "User" }>

/** What `again` takes of a principal. */
export const refOf = (principal: Principal): PrincipalRef | undefined =>
  principal._tag === "ApiKey"
    ? { _tag: "ApiKey", keyId: principal.keyId }
    : principal._tag === "User"
      ? principal
      : undefined

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
    /**
     * Who `ref`, as a credential minted at `issuedAt` names it, is now: a key
     * as it stands (none once revoked, its scopes and role today's), a user
     * unless they are gone or logged out everywhere since.
     */
    readonly again: (ref: PrincipalRef, issuedAt: Date) => Effect.Effect<Option.Option<Principal>>
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

      /** Whether a user still is, and has not logged out everywhere since `issuedAt`. */
      const userStands = (userId: string, issuedAt: Date) =>
        Effect.map(users.findById(userId), (user) => {
          // "Log out everywhere" ends the tokens issued before it.
          const validAfter = Option.flatMapNullishOr(user, (record) => record.tokensValidAfter)
          return (
            Option.isSome(user) &&
            (Option.isNone(validAfter) || issuedAt.getTime() >= validAfter.value.getTime())
          )
        })

      const again = (ref: PrincipalRef, issuedAt: Date) =>
        ref._tag === "ApiKey"
          ? keys.authenticateById(ref.keyId)
          : Effect.map(userStands(ref.userId, issuedAt), (stands) =>
              stands ? Option.some<Principal>(ref) : Option.none<Principal>()
            )

      const bearer = (token: string) =>
        resolvers.find((resolver) => resolver.accepts(token))?.resolve(token) ??
        (looksLikeJwt(token)
          ? Effect.gen(function* () {
              const claims = yield* tokens.verify(token)
              if (Option.isNone(claims)) return Option.none<Principal>()
              if (!(yield* userStands(claims.value.userId, claims.value.issuedAt)))
                return Option.none<Principal>()
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

      // Untraced: it runs on every request of the routes outside the HttpApi (each MCP call, say).
      const authorize = Effect.fnUntraced(function* (
        principal: Principal,
        access: Access,
        selector: string | undefined
      ) {
        const owner = yield* resolve(principal, selector)
        yield* check(owner, access)
        return owner
      })

      return Authenticator.of({ bearer, cookie, again, resolve, check, authorize })
    })
  )
}
