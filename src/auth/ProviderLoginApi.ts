import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { User } from "../domain/Identity.ts"
import { LoginFailed, LoginProviderNotFound } from "../domain/IdentityErrors.ts"

const provider = { provider: Schema.String }

/** Login through the OpenID Connect providers configured with `OIDC_<NAME>_*`. */
export class ProviderLoginApi extends HttpApiGroup.make("providerLogin")
  .add(
    HttpApiEndpoint.get("providers", "/auth/providers", {
      success: Schema.Struct({
        providers: Schema.Array(Schema.Struct({ name: Schema.String, login_url: Schema.String }))
      })
    }).annotate(OpenApi.Description, "The configured login providers and where each login starts."),
    HttpApiEndpoint.get("login", "/auth/:provider/login", {
      params: provider,
      query: { return_to: Schema.optionalKey(Schema.String) },
      success: Schema.Void,
      error: [LoginProviderNotFound.Wire, LoginFailed.Wire]
    }).annotate(
      OpenApi.Description,
      "Starts the authorization code flow (PKCE S256, `state`, `nonce`; kept server-side for ten minutes, one use): 302 to the provider. `return_to`, a path on this service, is where the callback sends the browser afterwards."
    ),
    HttpApiEndpoint.get("callback", "/auth/:provider/callback", {
      params: provider,
      success: Schema.Struct({ user: User }),
      error: [LoginProviderNotFound.Wire, LoginFailed.Wire]
    }).annotate(
      OpenApi.Description,
      "Where the provider sends the browser back. Checks state, PKCE and the ID token; the first login creates the user (and their personal account), a later one with the same verified email links the provider to the existing user. Sets the `service_session` cookie and answers `{ user }`, or 303 to the login's `return_to`. 400 `login_failed` for a callback that does not check out (wrong or reused state, denied, unverified email), 404 `provider_not_found`."
    )
  )
  .annotate(OpenApi.Title, "Auth") {}
