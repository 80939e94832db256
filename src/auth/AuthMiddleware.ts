import { Context } from "effect"
import { HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import { Forbidden, NotAuthenticated, Unauthorized } from "../domain/Errors.ts"
import type { Principal, User } from "../domain/Identity.ts"

export const SESSION_COOKIE = "service_session"

export class CurrentPrincipal extends Context.Service<CurrentPrincipal, Principal>()(
  "rbs/auth/CurrentPrincipal"
) {}

export class CurrentUser extends Context.Service<CurrentUser, User>()("rbs/auth/CurrentUser") {}

/** The account a request acts on, whether it came with a key or the dashboard cookie. */
export class CurrentAccount extends Context.Service<
  CurrentAccount,
  { readonly accountId: string; readonly userId: string; readonly apiKeyId: string | null }
>()("rbs/auth/CurrentAccount") {}

export const sessionCookie = HttpApiSecurity.apiKey({ key: SESSION_COOKIE, in: "cookie" })

/** `Authorization: Bearer <API key>` on the public `/v1/*` routes. */
export class ApiKeyAuth extends HttpApiMiddleware.Service<ApiKeyAuth, { provides: CurrentPrincipal }>()(
  "rbs/auth/ApiKeyAuth",
  {
    security: { bearer: HttpApiSecurity.bearer },
    error: Unauthorized.Wire
  }
) {}

/**
 * The dashboard cookie, for key management. A valid API key here is 403
 * (authenticated, but not this way); no credentials at all is 401.
 */
export class CookieAuth extends HttpApiMiddleware.Service<CookieAuth, { provides: CurrentUser }>()(
  "rbs/auth/CookieAuth",
  {
    security: { cookie: sessionCookie },
    error: [NotAuthenticated.Wire, Forbidden.Wire]
  }
) {}

/**
 * Routes both an API key (automation) and the dashboard cookie may use, such
 * as the billing summary: a Bearer key acts on its account, the cookie on the
 * user's personal account.
 */
export class KeyOrCookieAuth extends HttpApiMiddleware.Service<
  KeyOrCookieAuth,
  { provides: CurrentAccount }
>()("rbs/auth/KeyOrCookieAuth", {
  security: { bearer: HttpApiSecurity.bearer, cookie: sessionCookie },
  error: [Unauthorized.Wire, NotAuthenticated.Wire]
}) {}
