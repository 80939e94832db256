import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import { AuditEventList } from "../../kernel/Audit.ts"
import { InvalidField } from "../../kernel/Errors.ts"

export class AuditApi extends HttpApiGroup.make("audit")
  .add(
    HttpApiEndpoint.get("list", "/v1/audit/events", {
      query: {
        limit: Schema.optionalKey(Schema.String),
        cursor: Schema.optionalKey(Schema.String),
        actor: Schema.optionalKey(Schema.String),
        action: Schema.optionalKey(Schema.String),
        target: Schema.optionalKey(Schema.String),
        outcome: Schema.optionalKey(Schema.String),
        from: Schema.optionalKey(Schema.String),
        to: Schema.optionalKey(Schema.String)
      },
      success: AuditEventList,
      error: InvalidField.Wire
    })
      .annotateMerge(requires("audit.read"))
      .annotate(
        OpenApi.Description,
        "The active account's audit trail, newest first: every mutation (keys, sessions, members, organizations, service accounts, SSH keys, billing, access tokens, logins) with its actor (`user`, `api_key`, `service_account`, `system` or `assistant` (a runtime), and the person behind it), action, target, IP, user agent, time and outcome. Filters: `actor` (a user, key or service account id), `action` (exact, or a prefix ending in `.` such as `api_key.`), `target` (a target id), `outcome` (`success` or `failure`: a refused or failed mutation, a wrong password), `from` / `to` (ISO 8601, `from` inclusive, `to` exclusive). `limit` 1 to 200 (default 50); pass `next_cursor` as `cursor` for the next page. Events are kept `AUDIT_RETENTION_DAYS` (default 365)."
      )
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Audit") {}
