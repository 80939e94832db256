import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { AssistantLink, AssistantLoginUrl, AssistantNotFound } from "../../kernel/Assistant.ts"
import { Forbidden, Unauthorized } from "../../kernel/Errors.ts"
import { User } from "../../kernel/Identity.ts"
import { AccountNotFound, LoginFailed, LoginProviderNotFound } from "../../kernel/IdentityErrors.ts"

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
      "Where the provider sends the browser back (for the assistant sign-in's provider, `ASSISTANT_IDP`, it links the person to the assistant instead and answers `{ assistant_link }`, as the POST callback does). Checks state, PKCE and the ID token; the first login creates the user (and their personal account), a later one with the same verified email links the provider to the existing user. Sets the `service_session` cookie and answers `{ user }`, or 303 to the login's `return_to`. 400 `login_failed` for a callback that does not check out (wrong or reused state, denied, unverified email), 404 `provider_not_found`."
    ),
    HttpApiEndpoint.get("assistantLoginUrl", "/auth/:provider/login-url", {
      params: provider,
      query: { assistant_id: Schema.String },
      success: AssistantLoginUrl,
      error: [
        LoginProviderNotFound.Wire,
        LoginFailed.Wire,
        Unauthorized.Wire,
        Forbidden.Wire,
        AccountNotFound.Wire,
        AssistantNotFound.Wire
      ]
    }).annotate(
      OpenApi.Description,
      "Assistant sign-in (`ASSISTANT_IDP`): a URL at which a person signs in at the provider to link themselves to assistant `assistant_id` (the authorization code flow: PKCE, `state` and `nonce` kept server-side for ten minutes, one use). Asked with `Authorization: Bearer` by the assistant's runtime (its token) or a member (`sessions.write`); the URL itself is for the person, in any browser. 404 `provider_not_found` for another provider."
    ),
    HttpApiEndpoint.post("assistantCallback", "/auth/:provider/callback", {
      params: provider,
      payload: Schema.Struct({
        code: Schema.optionalKey(Schema.String),
        state: Schema.optionalKey(Schema.String),
        iss: Schema.optionalKey(Schema.String),
        error: Schema.optionalKey(Schema.String),
        error_description: Schema.optionalKey(Schema.String)
      }).pipe(HttpApiSchema.asFormUrlEncoded()),
      success: AssistantLink,
      error: [LoginProviderNotFound.Wire, LoginFailed.Wire]
    }).annotate(
      OpenApi.Description,
      "The assistant sign-in's callback for a provider that answers with `response_mode=form_post` (the GET callback takes the same parameters in its query): checks state, PKCE and the ID token, and links the person (`sub`, email) to the assistant: `{ assistant_link }`, audited as `assistant.linked`. 400 `login_failed` for a callback that does not check out."
    )
  )
  .annotate(OpenApi.Title, "Auth") {}
