import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import { InvalidField, RateLimited, ResourceLimitReached } from "../../kernel/Errors.ts"
import { PerAccountRateLimit, RouteRateLimit } from "../limits/LimitsMiddleware.ts"
import { PageSizeFromString } from "../../kernel/Session.ts"
import {
  CreateWebhookRequest,
  DeliveryConflict,
  DeliveryNotFound,
  DeliveryState,
  WEBHOOK_EVENTS,
  WebhookDelivery,
  WebhookDeliveryDetail,
  WebhookDeliveryList,
  WebhookList,
  WebhookNotFound,
  WebhookWithSecret
} from "../../kernel/Webhook.ts"

const did = { did: Schema.String }

const DELIVERY_TEXT = `Each event is POSTed as JSON \`{ id, type, created_at, account_id, data }\` to every webhook of the account subscribed to its type, signed per Standard Webhooks: \`webhook-id\` (the event id, the same on every attempt: de-duplicate on it), \`webhook-timestamp\` (Unix seconds) and \`webhook-signature\` (\`v1,<base64 HMAC-SHA256 of id.timestamp.body>\`; two entries while a rotated secret still signs). A 2xx within 15 s is success. Otherwise it is retried after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h (+-10%), then \`failed\`; a 410 Gone disables the webhook. Events: ${WEBHOOK_EVENTS.map((event) => `\`${event}\``).join(", ")}.`

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.get("list", "/v1/webhooks", { success: WebhookList })
      .annotateMerge(requires("webhooks.read"))
      .annotate(
        OpenApi.Description,
        `The active account's webhooks and the events they may subscribe to. ${DELIVERY_TEXT}`
      ),
    HttpApiEndpoint.post("create", "/v1/webhooks", {
      payload: CreateWebhookRequest,
      success: WebhookWithSecret.pipe(HttpApiSchema.status(201)),
      error: [InvalidField.Wire, RateLimited.Wire, ResourceLimitReached.Wire]
    })
      .annotateMerge(requires("webhooks.write", "any", audits("webhook.created", "webhook")))
      .annotate(PerAccountRateLimit, "webhook_write")
      .annotate(
        OpenApi.Description,
        "Adds a webhook: `url` (https; http only to addresses in `WEBHOOK_ALLOW_CIDRS`; never to a private, loopback or link-local address outside it), `events` (one or more of `supported_events`), `description` (up to 500 characters). The answer carries the full `signing_secret` this once. 400 `invalid_field` names the field at fault; 409 `resource_limit` when the account has `LIMIT_WEBHOOKS_PER_ACCOUNT` webhooks (default 20) already."
      ),
    HttpApiEndpoint.delete("delete", "/v1/webhooks/:id", {
      params: { id: Schema.String },
      success: HttpApiSchema.NoContent,
      error: [WebhookNotFound.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("webhooks.write", "any", audits("webhook.deleted", "webhook", "id")))
      .annotate(PerAccountRateLimit, "webhook_write"),
    HttpApiEndpoint.post("rotateSecret", "/v1/webhooks/:id/rotate-secret", {
      params: { id: Schema.String },
      success: WebhookWithSecret,
      error: [WebhookNotFound.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("webhooks.write", "any", audits("webhook.secret_rotated", "webhook", "id")))
      .annotate(PerAccountRateLimit, "webhook_write")
      .annotate(
        OpenApi.Description,
        "An extension: a new signing secret, shown this once. For 24 hours deliveries carry two signatures, with the new secret and the old, so receivers can switch without losing any."
      ),
    HttpApiEndpoint.get("deliveries", "/v1/webhooks/deliveries", {
      query: {
        webhook_id: Schema.optionalKey(Schema.String),
        event_type: Schema.optionalKey(Schema.String),
        state: Schema.optionalKey(DeliveryState),
        limit: Schema.optionalKey(PageSizeFromString),
        cursor: Schema.optionalKey(Schema.String)
      },
      success: WebhookDeliveryList,
      error: InvalidField.Wire
    })
      .annotateMerge(requires("webhooks.read"))
      .annotate(
        OpenApi.Description,
        "Deliveries of the active account, newest first, filtered by `webhook_id`, `event_type` and `state` (`pending`, `delivering`, `succeeded`, `failed`, `discarded`). `limit` 1 to 100 (default 20); pass `next_cursor` as `cursor` for the next page."
      ),
    HttpApiEndpoint.get("delivery", "/v1/webhooks/deliveries/:did", {
      params: did,
      success: WebhookDeliveryDetail,
      error: DeliveryNotFound.Wire
    })
      .annotateMerge(requires("webhooks.read"))
      .annotate(
        OpenApi.Description,
        "A delivery with its payload and its attempts (time, status code, duration, the first 1 KB of the answer)."
      ),
    HttpApiEndpoint.post("replay", "/v1/webhooks/deliveries/:did/replay", {
      params: did,
      success: WebhookDelivery,
      error: [DeliveryNotFound.Wire, DeliveryConflict.Wire, RateLimited.Wire]
    })
      .annotateMerge(
        requires("webhooks.write", "any", audits("webhook_delivery.replayed", "webhook_delivery", "did"))
      )
      .annotate(PerAccountRateLimit, "webhook_write")
      .annotate(
        OpenApi.Description,
        "Starts a new series of attempts for the same event (same `webhook-id`), at once. 409 `delivery_conflict` while an attempt is in flight."
      ),
    HttpApiEndpoint.post("discard", "/v1/webhooks/deliveries/:did/discard", {
      params: did,
      success: WebhookDelivery,
      error: [DeliveryNotFound.Wire, DeliveryConflict.Wire, RateLimited.Wire]
    })
      .annotateMerge(
        requires("webhooks.write", "any", audits("webhook_delivery.discarded", "webhook_delivery", "did"))
      )
      .annotate(PerAccountRateLimit, "webhook_write")
      .annotate(
        OpenApi.Description,
        "Stops the retries of a `pending` (or `delivering`) delivery: it becomes `discarded`. 409 `delivery_conflict` once it has finished."
      )
  )
  .middleware(RouteRateLimit)
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Webhooks") {}
