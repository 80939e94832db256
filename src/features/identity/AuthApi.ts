import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { EmailTaken, Forbidden, InvalidCredentials, RateLimited } from "../../kernel/Errors.ts"
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
      error: EmailTaken.Wire
    }).annotate(
      OpenApi.Description,
      "Creates a user and their personal account. Passwords need at least 10 characters."
    ),
    HttpApiEndpoint.post("login", "/auth/login", {
      payload: Credentials,
      success: Schema.Struct({ user: User }),
      error: [InvalidCredentials.Wire, RateLimited.Wire]
    }).annotate(
      OpenApi.Description,
      "Checks the credentials and sets the `service_session` cookie (HttpOnly, SameSite=Lax, Path=/, Secure behind https). An unknown email and a wrong password get the same answer in the same time. Attempts are limited per email (default 10 a minute) and per client IP (default 30 a minute): 429 `rate_limited` with `Retry-After` and the `X-RateLimit-*` headers (scope `principal`)."
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
