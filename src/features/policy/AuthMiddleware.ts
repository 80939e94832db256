import { Context } from "effect"
import { HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import { Forbidden, Unauthorized } from "../../kernel/Errors.ts"
import { AccountNotFound } from "../../kernel/IdentityErrors.ts"
import type { Owner, Principal } from "../../kernel/Owner.ts"

export const SESSION_COOKIE = "service_session"

/** Who is calling: a user (cookie or access token) or an API key. */
export class CurrentPrincipal extends Context.Service<CurrentPrincipal, Principal>()(
  "rbs/auth/CurrentPrincipal"
) {}

/** The active account and who acts on it, with the caller's role there. */
export class CurrentOwner extends Context.Service<CurrentOwner, Owner>()("rbs/auth/CurrentOwner") {}

/** Where a request came from, for the audit trail. */
export interface RequestOrigin {
  readonly ip: string | null
  readonly userAgent: string | null
}
export const CurrentOrigin = Context.Reference<RequestOrigin>("rbs/auth/CurrentOrigin", {
  defaultValue: () => ({ ip: null, userAgent: null })
})

export const sessionCookie = HttpApiSecurity.apiKey({ key: SESSION_COOKIE, in: "cookie" })

/**
 * `Authorization: Bearer <API key or access token>`, or the dashboard cookie.
 * Only authenticates: a missing, unknown, revoked or expired credential is 401.
 */
export class Authenticate extends HttpApiMiddleware.Service<Authenticate, { provides: CurrentPrincipal }>()(
  "rbs/auth/Authenticate",
  {
    security: { bearer: HttpApiSecurity.bearer, cookie: sessionCookie },
    error: Unauthorized.Wire
  }
) {}

/**
 * Picks the active account (`X-Service-Account`) and checks the endpoint's
 * `RequiredAccess` against the caller's credential, role and key scopes:
 * an account the caller is not in is 404 `account_not_found`, a refusal 403.
 */
export class Authorize extends HttpApiMiddleware.Service<
  Authorize,
  { provides: CurrentOwner; requires: CurrentPrincipal }
>()("rbs/auth/Authorize", {
  error: [Forbidden.Wire, AccountNotFound.Wire]
}) {}
