import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Forbidden, InvalidField, ResourceLimitReached } from "../../kernel/Errors.ts"
import { ApiKey, CreatedApiKey, CreateKeyRequest, RotateKeyRequest } from "../../kernel/Identity.ts"
import { KeyNotFound, KeyRevoked } from "../../kernel/IdentityErrors.ts"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"

const keyId = { key_id: Schema.String }

export const KEY_ROUTES_NOTE =
  "Takes the dashboard `service_session` cookie (not an access token: minting credentials needs the cookie); an API key only if it was created explicitly with `keys.read` / `keys.write` (a full-access key is 403 `forbidden` here, so a leaked key cannot mint more). Members manage the keys they made; admins and owners every user key of the account."

export class KeysApi extends HttpApiGroup.make("keys")
  .add(
    HttpApiEndpoint.post("create", "/v1/keys", {
      payload: CreateKeyRequest,
      success: CreatedApiKey.pipe(HttpApiSchema.status(201)),
      error: [InvalidField.Wire, ResourceLimitReached.Wire]
    })
      .annotateMerge(requires("keys.write", "cookie-or-scoped-key", audits("api_key.created", "api_key")))
      .annotate(
        OpenApi.Description,
        "Creates an API key bound to the active account, acting as the caller. `name` 1 to 100 characters; `scopes` a non-empty list from the scope table (omitted or null: full access; a scoped key may only mint keys within its own scopes); `mode` `live` (default, `svc_live_`) or `test` (`svc_test_`: its sessions are marked `live: false`, and metered and charged as a live key's). The `secret` (prefix + 32 random bytes, base64url) is returned only here; the service keeps its SHA-256. 409 `resource_limit` when the account has `LIMIT_KEYS_PER_ACCOUNT` live keys (default 100; revoked ones do not count, a rotated one until its grace ends) already."
      ),
    HttpApiEndpoint.get("list", "/v1/keys", {
      success: Schema.Struct({ keys: Schema.Array(ApiKey) })
    })
      .annotateMerge(requires("keys.read", "cookie-or-scoped-key"))
      .annotate(
        OpenApi.Description,
        "The keys the caller manages in the active account, newest first, never their secrets."
      ),
    HttpApiEndpoint.delete("revoke", "/v1/keys/:key_id", {
      params: keyId,
      success: HttpApiSchema.NoContent,
      error: KeyNotFound.Wire
    })
      .annotateMerge(
        requires("keys.write", "cookie-or-scoped-key", audits("api_key.revoked", "api_key", "key_id"))
      )
      .annotate(
        OpenApi.Description,
        "Revokes the key at once: the next request with it, REST or a CDP connect, is 401. Revoking a revoked key is a no-op."
      ),
    HttpApiEndpoint.post("rotate", "/v1/keys/:key_id/rotate", {
      params: keyId,
      payload: [RotateKeyRequest, Schema.Null],
      success: CreatedApiKey,
      error: [KeyNotFound.Wire, KeyRevoked.Wire, InvalidField.Wire, Forbidden.Wire, ResourceLimitReached.Wire]
    })
      .annotateMerge(
        requires("keys.write", "cookie-or-scoped-key", audits("api_key.rotated", "api_key", "key_id"))
      )
      .annotate(
        OpenApi.Description,
        "Creates a new key with the same name, scopes, mode and identity and answers it with its secret. `grace_days` 0 to 30 (default 7): both keys work until the grace ends, then the old one is 401; 0 revokes the old key at once. The old key's `revoked_at` is the end of its grace. 409 `key_revoked` for a key already revoked or rotated. Only a key that acts as the caller may be rotated (their own user key; a service account's key by that service account's key), and a scoped caller only a key within its scopes: anything else is 403 `forbidden` (an admin revokes another member's key instead). 409 `resource_limit` for a rotation with a grace when the account has `LIMIT_KEYS_PER_ACCOUNT` live keys: both would be live until the grace ends (a rotation with `grace_days` 0 replaces the key)."
      )
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "API keys")
  .annotate(OpenApi.Description, KEY_ROUTES_NOTE) {}
