import { Schema } from "effect"

/** One recorded mutation (GET /v1/audit/events). */
export const AuditEvent = Schema.Struct({
  id: Schema.String,
  occurred_at: Schema.DateFromString,
  actor: Schema.Struct({
    type: Schema.Literals(["user", "api_key", "service_account", "system", "assistant"]),
    id: Schema.NullOr(Schema.String),
    /** The person behind the actor: the user, or the user whose key it was. */
    user_id: Schema.NullOr(Schema.String)
  }),
  action: Schema.String,
  target: Schema.Struct({ type: Schema.String, id: Schema.NullOr(Schema.String) }),
  ip: Schema.NullOr(Schema.String),
  user_agent: Schema.NullOr(Schema.String),
  outcome: Schema.Literals(["success", "failure"]),
  details: Schema.Record(Schema.String, Schema.Unknown)
})
export type AuditEvent = typeof AuditEvent.Type

export const AuditEventList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(AuditEvent),
  has_more: Schema.Boolean,
  next_cursor: Schema.NullOr(Schema.String)
})
export type AuditEventList = typeof AuditEventList.Type
