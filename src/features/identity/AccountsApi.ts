import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import { Forbidden, InvalidField, ResourceLimitReached } from "../../kernel/Errors.ts"
import {
  AccountInfo,
  AccountMemberInfo,
  ApiKey,
  CreatedApiKey,
  CreateKeyRequest,
  ServiceAccountInfo
} from "../../kernel/Identity.ts"
import {
  AccountNameTaken,
  AlreadyMember,
  KeyNotFound,
  LastOwner,
  MemberNotFound,
  PersonalAccount,
  ServiceAccountNotFound,
  UserNotFound
} from "../../kernel/IdentityErrors.ts"

const uid = { uid: Schema.String }
const said = { said: Schema.String }

export class AccountsApi extends HttpApiGroup.make("accounts")
  .add(
    HttpApiEndpoint.get("list", "/v1/accounts", {
      success: Schema.Struct({ accounts: Schema.Array(AccountInfo) })
    })
      .annotateMerge(requires(null))
      .annotate(
        OpenApi.Description,
        "The accounts the caller can act on, with their role in each (personal first). An API key sees only the account it is bound to."
      ),
    HttpApiEndpoint.get("current", "/v1/accounts/current", {
      success: Schema.Struct({ account: AccountInfo })
    })
      .annotateMerge(requires(null))
      .annotate(
        OpenApi.Description,
        "The active account (`X-Service-Account`, default personal) and the caller's role."
      ),
    HttpApiEndpoint.post("createOrganization", "/v1/accounts/organizations", {
      payload: Schema.Struct({ name: Schema.String }),
      success: Schema.Struct({ account: AccountInfo }),
      error: [InvalidField.Wire, AccountNameTaken.Wire]
    })
      .annotateMerge(requires(null, "person", audits("organization.created", "account")))
      .annotate(
        OpenApi.Description,
        "Creates an organization owned by the caller (a person: cookie or access token). `name`: 1 to 64 letters, digits, spaces, `.`, `_` or `-`, starting with a letter or digit, unique ignoring case, not `personal`; it is what `X-Service-Account` matches."
      ),
    HttpApiEndpoint.get("listMembers", "/v1/accounts/current/members", {
      success: Schema.Struct({ members: Schema.Array(AccountMemberInfo) })
    }).annotateMerge(requires("accounts.member")),
    HttpApiEndpoint.post("addMember", "/v1/accounts/current/members", {
      payload: Schema.Struct({
        email: Schema.String,
        role: Schema.optionalKey(Schema.NullOr(Schema.String))
      }),
      success: Schema.Struct({ account: AccountInfo, member: AccountMemberInfo }),
      error: [InvalidField.Wire, UserNotFound.Wire, AlreadyMember.Wire, PersonalAccount.Wire, Forbidden.Wire]
    })
      .annotateMerge(requires("accounts.admin", "any", audits("member.added", "user")))
      .annotate(
        OpenApi.Description,
        "Adds a registered user by email with `role` `owner`, `admin`, `member` (default) or `viewer`. Admins and owners; only an owner adds an owner. 404 `user_not_found`, 409 `already_member`, 409 `personal_account` on a personal account."
      ),
    HttpApiEndpoint.patch("updateMember", "/v1/accounts/current/members/:uid", {
      params: uid,
      payload: Schema.Struct({ role: Schema.String }),
      success: Schema.Struct({ member: AccountMemberInfo }),
      error: [InvalidField.Wire, MemberNotFound.Wire, LastOwner.Wire, Forbidden.Wire]
    })
      .annotateMerge(requires("accounts.admin", "any", audits("member.role_changed", "user", "uid")))
      .annotate(
        OpenApi.Description,
        "Changes a member's role. Only an owner makes or unmakes an owner; the last owner cannot be demoted (409 `last_owner`)."
      ),
    HttpApiEndpoint.delete("removeMember", "/v1/accounts/current/members/:uid", {
      params: uid,
      success: HttpApiSchema.NoContent,
      error: [MemberNotFound.Wire, LastOwner.Wire, Forbidden.Wire]
    })
      .annotateMerge(requires("accounts.member", "any", audits("member.removed", "user", "uid")))
      .annotate(
        OpenApi.Description,
        "Removes a member (admins and owners; only an owner removes an owner), or leaves the account when `uid` is the caller's own id (any role). The last owner cannot leave (409 `last_owner`). The member's API keys in the account are revoked; service accounts' keys are not."
      ),
    HttpApiEndpoint.get("listServiceAccounts", "/v1/accounts/current/service-accounts", {
      success: Schema.Struct({ service_accounts: Schema.Array(ServiceAccountInfo) })
    }).annotateMerge(requires("accounts.admin")),
    HttpApiEndpoint.post("createServiceAccount", "/v1/accounts/current/service-accounts", {
      payload: Schema.Struct({ name: Schema.String, role: Schema.optionalKey(Schema.NullOr(Schema.String)) }),
      success: Schema.Struct({ service_account: ServiceAccountInfo }).pipe(HttpApiSchema.status(201)),
      error: InvalidField.Wire
    })
      .annotateMerge(
        requires("accounts.admin", "person", audits("service_account.created", "service_account"))
      )
      .annotate(
        OpenApi.Description,
        "Creates a non-human member with `role` `admin`, `member` (default) or `viewer`. Its keys act as it, not as whoever made them, and survive that person leaving."
      ),
    HttpApiEndpoint.delete("deleteServiceAccount", "/v1/accounts/current/service-accounts/:said", {
      params: said,
      success: HttpApiSchema.NoContent,
      error: ServiceAccountNotFound.Wire
    })
      .annotateMerge(
        requires("accounts.admin", "any", audits("service_account.deleted", "service_account", "said"))
      )
      .annotate(OpenApi.Description, "Deletes the service account; its keys are revoked at once."),
    HttpApiEndpoint.get("listServiceAccountKeys", "/v1/accounts/current/service-accounts/:said/keys", {
      params: said,
      success: Schema.Struct({ keys: Schema.Array(ApiKey) }),
      error: ServiceAccountNotFound.Wire
    }).annotateMerge(requires("accounts.admin")),
    HttpApiEndpoint.post("createServiceAccountKey", "/v1/accounts/current/service-accounts/:said/keys", {
      params: said,
      payload: CreateKeyRequest,
      success: CreatedApiKey.pipe(HttpApiSchema.status(201)),
      error: [ServiceAccountNotFound.Wire, InvalidField.Wire, ResourceLimitReached.Wire]
    })
      .annotateMerge(requires("accounts.admin", "cookie", audits("api_key.created", "api_key")))
      .annotate(
        OpenApi.Description,
        "A key acting as the service account; the body is `POST /v1/keys`'s. The dashboard cookie only (no key or access token mints keys). Its keys count in the account's `LIMIT_KEYS_PER_ACCOUNT` (409 `resource_limit`)."
      ),
    HttpApiEndpoint.delete(
      "revokeServiceAccountKey",
      "/v1/accounts/current/service-accounts/:said/keys/:kid",
      {
        params: { said: Schema.String, kid: Schema.String },
        success: HttpApiSchema.NoContent,
        error: [ServiceAccountNotFound.Wire, KeyNotFound.Wire]
      }
    ).annotateMerge(requires("accounts.admin", "any", audits("api_key.revoked", "api_key", "kid")))
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Accounts")
  .annotate(
    OpenApi.Description,
    "Every user has a personal account; organizations are accounts with members. `X-Service-Account` (an account id, its exact name, or `personal`) picks the active account for a person; an API key is bound to its account. An account the caller is not a member of is 404 `account_not_found`."
  ) {}
