import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Forbidden, InvalidCredentials, RateLimited } from "../../kernel/Errors.ts"
import { AccountInfo, User } from "../../kernel/Identity.ts"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"

const Credentials = Schema.Struct({
  email: Schema.String,
  password: Schema.String
})

export const AccessToken = Schema.Struct({
  access_token: Schema.String,
  token_type: Schema.Literal("Bearer"),
  expires_in: Schema.Number,
  expires_at: Schema.DateFromString,
  account_id: Schema.String
})

/** Registration and password login: no credentials needed. */
export class AuthApi extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("register", "/auth/register", {
      payload: Credentials,
      success: Schema.Struct({ user: User }).pipe(HttpApiSchema.status(201)),
      error: RateLimited.Wire
    }).annotate(
      OpenApi.Description,
      "Creates a user and their personal account. Passwords need at least 10 characters. An email already registered gets the same answer, after the same work, so a sign-up tells nobody which emails have an account: its owner is unchanged, the `user` answered is no one's, and the password given does not log in. Limited per client address (`LIMIT_REGISTRATIONS_PER_IP`, default 10 a minute, scope `principal`) and for everyone together (`LIMIT_REGISTRATIONS_PER_MINUTE`, 60, scope `service`): 429 `rate_limited` with `Retry-After` and the `X-RateLimit-*` headers, before the password is hashed. Passwords are hashed on threads of their own (`PASSWORD_HASH_WORKERS`); when their queue is full the answer is 429 `rate_limited` with `Retry-After: 1`."
    ),
    HttpApiEndpoint.post("login", "/auth/login", {
      payload: Credentials,
      success: Schema.Struct({ user: User }),
      error: [InvalidCredentials.Wire, RateLimited.Wire]
    }).annotate(
      OpenApi.Description,
      "Checks the credentials and sets the `service_session` cookie (HttpOnly, SameSite=Lax, Path=/, Secure behind https). An unknown email and a wrong password get the same answer in the same time. Attempts are limited per client address (`LIMIT_LOGIN_ATTEMPTS_PER_IP`, default 30 a minute), per email from one address (`LIMIT_LOGIN_ATTEMPTS_PER_EMAIL`, 10) and per email from every address together (`LIMIT_LOGIN_ATTEMPTS_PER_ACCOUNT`, 100), so no one address can lock a user out: 429 `rate_limited` with `Retry-After` and the `X-RateLimit-*` headers (scope `principal`). The client address is the TCP peer's, or behind a proxy in `TRUSTED_PROXIES` the one its `Forwarded` / `X-Forwarded-For` names."
    ),
    HttpApiEndpoint.post("logout", "/auth/logout", {
      success: HttpApiSchema.NoContent
    }).annotate(OpenApi.Description, "Ends this dashboard session and clears the cookie.")
  )
  .annotate(OpenApi.Title, "Auth") {}

/** What a logged-in person does with their login. */
export class SessionAuthApi extends HttpApiGroup.make("sessionAuth")
  .add(
    HttpApiEndpoint.get("me", "/auth/me", {
      success: Schema.Struct({ user: User, accounts: Schema.Array(AccountInfo) })
    })
      .annotateMerge(requires(null, "person"))
      .annotate(
        OpenApi.Description,
        "The user (cookie or access token) with their accounts and role in each."
      ),
    HttpApiEndpoint.post("logoutEverywhere", "/auth/logout-everywhere", {
      success: HttpApiSchema.NoContent
    })
      .annotateMerge(requires(null, "person", audits("user.logged_out_everywhere", "user")))
      .annotate(
        OpenApi.Description,
        "Ends every dashboard session of the user and invalidates every access token issued so far. API keys are not touched (revoke them with `DELETE /v1/keys/{key_id}`)."
      ),
    HttpApiEndpoint.post("token", "/auth/token", {
      success: AccessToken,
      error: Forbidden.Wire
    })
      .annotateMerge(requires(null, "cookie", audits("access_token.issued", "user")))
      .annotate(
        OpenApi.Description,
        "Mints a short-lived access token (a signed JWT, 15 minutes) for the logged-in user and the active account (`X-Service-Account`, default personal), for `Authorization: Bearer` on `/v1/*`. It acts as the user with their role; `X-Service-Account` may still pick another of their accounts. Dashboard cookie only. `POST /auth/logout-everywhere` invalidates it early."
      )
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Auth") {}
