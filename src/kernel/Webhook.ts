import { Schema } from "effect"
import { wire } from "./ApiError.ts"
import { SessionType } from "./Session.ts"

/** Every event a webhook may subscribe to (`supported_events`). */
export const WEBHOOK_EVENTS = [
  "session.created",
  "session.ready",
  "session.closed",
  "session.error",
  "key.created",
  "key.revoked",
  "key.rotated",
  "balance.low",
  "balance.depleted",
  "billing.topup_succeeded",
  "member.added",
  "member.removed",
  "job.succeeded",
  "job.failed",
  "workspace.created",
  "workspace.deleted",
  "snapshot.created",
  "snapshot.restored",
  "config_intent.proposed",
  "config_intent.approved",
  "config_intent.denied",
  "config_intent.expired"
] as const
export const WebhookEventType = Schema.Literals(WEBHOOK_EVENTS)
export type WebhookEventType = typeof WebhookEventType.Type

/** CustomerWebhookInfo: the secret only as a preview. */
export const CustomerWebhookInfo = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  description: Schema.optionalKey(Schema.NullOr(Schema.String)),
  signing_secret_preview: Schema.String,
  created_at: Schema.DateFromString,
  updated_at: Schema.DateFromString,
  /** An extension: set when a 410 Gone from the endpoint disabled it; no event is delivered since. */
  disabled_at: Schema.optionalKey(Schema.NullOr(Schema.DateFromString))
})
export type CustomerWebhookInfo = typeof CustomerWebhookInfo.Type

/** `POST /v1/webhooks` and the secret rotation: the full secret, shown this once. */
export const WebhookWithSecret = Schema.Struct({
  ...CustomerWebhookInfo.fields,
  signing_secret: Schema.String.annotate({
    description:
      "`whsec_` + base64 of 24 random bytes (Standard Webhooks). Shown once; later reads show `signing_secret_preview` only."
  })
})
export type WebhookWithSecret = typeof WebhookWithSecret.Type

export const WebhookList = Schema.Struct({
  supported_events: Schema.Array(Schema.String),
  webhooks: Schema.Array(CustomerWebhookInfo)
})

export const CreateWebhookRequest = Schema.Struct({
  url: Schema.String,
  events: Schema.Array(Schema.String),
  description: Schema.optionalKey(Schema.NullOr(Schema.String))
})
export type CreateWebhookRequest = typeof CreateWebhookRequest.Type

export const DeliveryState = Schema.Literals(["pending", "delivering", "succeeded", "failed", "discarded"])
export type DeliveryState = typeof DeliveryState.Type

/** One attempt to deliver: when, what the endpoint answered, how long it took. */
export const DeliveryAttempt = Schema.Struct({
  series: Schema.Number,
  number: Schema.Number,
  started_at: Schema.DateFromString,
  finished_at: Schema.NullOr(Schema.DateFromString),
  duration_ms: Schema.NullOr(Schema.Number),
  status_code: Schema.NullOr(Schema.Number),
  error: Schema.NullOr(Schema.String),
  response_excerpt: Schema.NullOr(
    Schema.String.annotate({ description: "The first 1 KB of the endpoint's answer." })
  )
})

export const WebhookDelivery = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("webhook_delivery"),
  webhook_id: Schema.String,
  event_id: Schema.String.annotate({ description: "The `webhook-id` header: the same on every attempt." }),
  event_type: Schema.String,
  state: DeliveryState,
  attempts: Schema.Number.annotate({ description: "Attempts in the current series (a replay starts one)." }),
  next_attempt_at: Schema.NullOr(Schema.DateFromString),
  last_status: Schema.NullOr(Schema.Number),
  created_at: Schema.DateFromString,
  updated_at: Schema.DateFromString
})
export type WebhookDelivery = typeof WebhookDelivery.Type

const Timestamp = Schema.String.annotate({ description: "ISO 8601" })

/** `session.*`: the session as its row says at the change. */
const SessionEventData = Schema.Struct({
  id: Schema.String,
  session_type: SessionType,
  status: Schema.String,
  region: Schema.String,
  created_at: Timestamp,
  ready_at: Schema.NullOr(Timestamp),
  expires_at: Timestamp,
  ended_at: Schema.NullOr(Timestamp),
  ended_reason: Schema.NullOr(Schema.String),
  bytes_up: Schema.Number,
  bytes_down: Schema.Number,
  metadata: Schema.Record(Schema.String, Schema.String).annotate({
    description: "The session's `metadata`, as given at create."
  })
})

/** `job.*`: the job as it finished (its `input` left out: `GET /v1/jobs/{id}` has it). */
const JobEventData = Schema.Struct({
  id: Schema.String,
  kind: Schema.String,
  state: Schema.Literals(["succeeded", "failed"]),
  attempts: Schema.Number,
  session_id: Schema.NullOr(Schema.String),
  result: Schema.NullOr(Schema.Unknown),
  result_url: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.Struct({ code: Schema.String, message: Schema.String })),
  created_at: Timestamp,
  finished_at: Timestamp
})

/** `workspace.*`: the workspace's id, name and kind. */
const WorkspaceEventData = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  session_type: Schema.NullOr(Schema.String),
  template: Schema.Boolean,
  source_workspace_id: Schema.NullOr(Schema.String)
})

/** `snapshot.*`: the snapshot, by id and name, and its workspace. */
const SnapshotEventData = Schema.Struct({
  id: Schema.String,
  workspace_id: Schema.String,
  name: Schema.String,
  used_bytes: Schema.Number
})

/** What each event type carries in `data`. */
/** An assistant's config intent, as its events carry it. */
const ConfigIntentEventData = Schema.Struct({
  id: Schema.String,
  assistant_id: Schema.String,
  status: Schema.String,
  patch: Schema.Record(Schema.String, Schema.Unknown),
  reason: Schema.NullOr(Schema.String),
  base_version: Schema.Number,
  proposed_by: Schema.String,
  decided_by: Schema.NullOr(Schema.String),
  applied_version: Schema.NullOr(Schema.Number)
})

export const WEBHOOK_EVENT_DATA = {
  "session.created": SessionEventData,
  "session.ready": SessionEventData,
  "session.closed": SessionEventData,
  "session.error": SessionEventData,
  "key.created": Schema.Struct({
    id: Schema.String,
    name: Schema.String,
    prefix: Schema.String,
    scopes: Schema.NullOr(Schema.Array(Schema.String)),
    mode: Schema.String,
    service_account_id: Schema.NullOr(Schema.String)
  }),
  "key.revoked": Schema.Struct({ id: Schema.String, prefix: Schema.String }),
  "key.rotated": Schema.Struct({ id: Schema.String, new_key_id: Schema.String, old_key_ends_at: Timestamp }),
  "balance.low": Schema.Struct({
    balance_micro_usd: Schema.Number,
    threshold_micro_usd: Schema.Number,
    session_id: Schema.String
  }),
  "balance.depleted": Schema.Struct({ balance_micro_usd: Schema.Number, session_id: Schema.String }),
  "billing.topup_succeeded": Schema.Struct({
    amount_micro_usd: Schema.Number,
    balance_micro_usd: Schema.Number,
    provider: Schema.NullOr(Schema.String)
  }),
  "member.added": Schema.Struct({ user_id: Schema.String, role: Schema.String }),
  "member.removed": Schema.Struct({ user_id: Schema.String, role: Schema.String, left: Schema.Boolean }),
  "job.succeeded": JobEventData,
  "job.failed": JobEventData,
  "workspace.created": WorkspaceEventData,
  "workspace.deleted": WorkspaceEventData,
  "snapshot.created": SnapshotEventData,
  "snapshot.restored": SnapshotEventData,
  "config_intent.proposed": ConfigIntentEventData,
  "config_intent.approved": ConfigIntentEventData,
  "config_intent.denied": ConfigIntentEventData,
  "config_intent.expired": ConfigIntentEventData
} as const

const eventOf = <T extends WebhookEventType>(type: T) =>
  Schema.Struct({
    id: Schema.String.annotate({ description: "The event id, also the `webhook-id` header." }),
    type: Schema.Literal(type),
    created_at: Timestamp,
    account_id: Schema.String,
    data: WEBHOOK_EVENT_DATA[type]
  })

/** The body of a delivery: one member per event type, with that type's `data`. */
export const WebhookEventPayload = Schema.Union([
  eventOf("session.created"),
  eventOf("session.ready"),
  eventOf("session.closed"),
  eventOf("session.error"),
  eventOf("key.created"),
  eventOf("key.revoked"),
  eventOf("key.rotated"),
  eventOf("balance.low"),
  eventOf("balance.depleted"),
  eventOf("billing.topup_succeeded"),
  eventOf("member.added"),
  eventOf("member.removed"),
  eventOf("job.succeeded"),
  eventOf("job.failed"),
  eventOf("workspace.created"),
  eventOf("workspace.deleted"),
  eventOf("snapshot.created"),
  eventOf("snapshot.restored"),
  eventOf("config_intent.proposed"),
  eventOf("config_intent.approved"),
  eventOf("config_intent.denied"),
  eventOf("config_intent.expired")
]).annotate({
  identifier: "WebhookEvent",
  description: "The JSON body of every webhook delivery: `{ id, type, created_at, account_id, data }`."
})

export type WebhookEventPayload = typeof WebhookEventPayload.Type

/** The `data` an event of type `T` carries. */
export type WebhookEventData<T extends WebhookEventType> = (typeof WEBHOOK_EVENT_DATA)[T]["Encoded"]

export const WebhookDeliveryDetail = Schema.Struct({
  ...WebhookDelivery.fields,
  payload: Schema.NullOr(WebhookEventPayload),

  attempt_log: Schema.Array(DeliveryAttempt)
})

export const WebhookDeliveryList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(WebhookDelivery),
  has_more: Schema.Boolean,
  next_cursor: Schema.NullOr(Schema.String)
})

export class WebhookNotFound extends Schema.TaggedError<WebhookNotFound>()("WebhookNotFound", {}) {
  readonly status = 404
  readonly code = "webhook_not_found"
  override readonly message = "Webhook not found."
  static readonly Wire = wire(this, () => new WebhookNotFound())
}

export class DeliveryNotFound extends Schema.TaggedError<DeliveryNotFound>()("DeliveryNotFound", {}) {
  readonly status = 404
  readonly code = "delivery_not_found"
  override readonly message = "Webhook delivery not found."
  static readonly Wire = wire(this, () => new DeliveryNotFound())
}

/** Replay while an attempt is in flight, or discard of a delivery that has finished. */
export class DeliveryConflict extends Schema.TaggedError<DeliveryConflict>()("DeliveryConflict", {
  detail: Schema.String
}) {
  readonly status = 409
  readonly code = "delivery_conflict"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new DeliveryConflict({ detail: message }))
}
