import { Schema } from "effect"
import { wire } from "./ApiError.ts"

export const INTENT_STATUSES = ["pending", "approved", "denied", "expired"] as const

/** How long an intent waits for a decision, unless its proposal says otherwise (1 minute to 7 days). */
export const DEFAULT_INTENT_TTL_SECONDS = 24 * 3600
export const MAX_INTENT_TTL_SECONDS = 7 * 24 * 3600

export const ProposeIntentRequest = Schema.Struct({
  patch: Schema.Record(Schema.String, Schema.Unknown).annotate({
    description:
      "The change, as a JSON merge patch (RFC 7396) of the assistant's `config`: a key set to null is removed."
  }),
  reason: Schema.optionalKey(
    Schema.String.annotate({ description: "Why, for the person deciding (2000 characters)." })
  ),
  expires_in_seconds: Schema.optionalKey(
    Schema.Int.annotate({ description: "How long it waits for a decision: 60 to 604800 (default 86400)." })
  )
})
export type ProposeIntentRequest = typeof ProposeIntentRequest.Type

export const DecideIntentRequest = Schema.Struct({
  note: Schema.optionalKey(
    Schema.String.annotate({ description: "A note kept with the decision (2000 characters)." })
  )
})
export type DecideIntentRequest = typeof DecideIntentRequest.Type

export const ConfigIntentInfo = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("assistant_config_intent"),
  assistant_id: Schema.String,
  patch: Schema.Record(Schema.String, Schema.Unknown),
  reason: Schema.NullOr(Schema.String),
  base_version: Schema.Number.annotate({ description: "The `config_version` it was proposed on." }),
  status: Schema.Literals(INTENT_STATUSES),
  proposed_by: Schema.String.annotate({
    description: "`assistant:<id>` (its runtime), `user:<id>`, `api_key:<id>`..."
  }),
  decided_by: Schema.NullOr(Schema.String),
  decision_note: Schema.NullOr(Schema.String),
  applied_version: Schema.NullOr(Schema.Number).annotate({
    description: "The `config_version` its approval made."
  }),
  created_at: Schema.DateFromString,
  expires_at: Schema.DateFromString,
  decided_at: Schema.NullOr(Schema.DateFromString)
})
export type ConfigIntentInfo = typeof ConfigIntentInfo.Type

export const ConfigIntentList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(ConfigIntentInfo),
  has_more: Schema.Boolean,
  next_cursor: Schema.NullOr(Schema.String)
})

export class IntentNotFound extends Schema.TaggedError<IntentNotFound>()("IntentNotFound", {}) {
  readonly status = 404
  readonly code = "intent_not_found"
  override readonly message = "Config intent not found."
  static readonly Wire = wire(this, () => new IntentNotFound())
}

export class IntentConflict extends Schema.TaggedError<IntentConflict>()("IntentConflict", {
  detail: Schema.String
}) {
  readonly status = 409
  readonly code = "intent_conflict"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new IntentConflict({ detail: message }))
}
