import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { EmailTaken, InvalidCredentials } from "../domain/Errors.ts"
import { AccountInfo, ApiKey, CreatedApiKey, User } from "../domain/Identity.ts"
import { CookieAuth } from "./AuthMiddleware.ts"

const Credentials = Schema.Struct({
  email: Schema.String,
  password: Schema.String
})

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
      error: InvalidCredentials.Wire
    }).annotate(
      OpenApi.Description,
      "Checks the credentials and sets the `service_session` cookie (HttpOnly, SameSite=Lax, Path=/, Secure behind https)."
    ),
    HttpApiEndpoint.post("logout", "/auth/logout", {
      success: HttpApiSchema.NoContent
    }).annotate(OpenApi.Description, "Ends the dashboard session and clears the cookie."),
    HttpApiEndpoint.get("me", "/auth/me", {
      success: Schema.Struct({ user: User, accounts: Schema.Array(AccountInfo) })
    }).middleware(CookieAuth)
  )
  .annotate(OpenApi.Title, "Auth") {}

export class KeysApi extends HttpApiGroup.make("keys")
  .add(
    HttpApiEndpoint.post("create", "/v1/keys", {
      payload: Schema.Struct({ name: Schema.String }),
      success: CreatedApiKey.pipe(HttpApiSchema.status(201))
    }).annotate(
      OpenApi.Description,
      "Creates an API key bound to the caller's personal account. The `secret` (`svc_live_` + 32 random bytes, base64url) is returned only here; the service keeps its SHA-256."
    ),
    HttpApiEndpoint.get("list", "/v1/keys", {
      success: Schema.Struct({ keys: Schema.Array(ApiKey) })
    })
  )
  .middleware(CookieAuth)
  .annotate(OpenApi.Title, "API keys")
  .annotate(
    OpenApi.Description,
    "Key management takes the dashboard `service_session` cookie; a Bearer API key here is 403 `forbidden`."
  ) {}
