import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { WEBHOOK_EVENTS } from "../../kernel/Webhook.ts"
import { WebhookDeliveries } from "../../features/webhooks/WebhookDeliveries.ts"
import { Webhooks } from "../../features/webhooks/Webhooks.ts"

export const WebhooksHttp = HttpApiBuilder.group(
  Api,
  "webhooks",
  Effect.fn(function* (handlers) {
    const webhooks = yield* Webhooks
    const deliveries = yield* WebhookDeliveries
    const owner = Effect.service(CurrentOwner)
    return handlers
      .handle("list", () =>
        Effect.flatMap(owner, (o) =>
          Effect.map(webhooks.list(o), (list) => ({ supported_events: WEBHOOK_EVENTS, webhooks: list }))
        )
      )
      .handle("create", ({ payload }) => Effect.flatMap(owner, (o) => webhooks.create(o, payload)))
      .handle("delete", ({ params }) => Effect.flatMap(owner, (o) => webhooks.remove(o, params.id)))
      .handle("rotateSecret", ({ params }) =>
        Effect.flatMap(owner, (o) => webhooks.rotateSecret(o, params.id))
      )
      .handle("deliveries", ({ query }) =>
        Effect.flatMap(owner, (o) =>
          Effect.map(deliveries.list(o, query), (page) => ({
            object: "list" as const,
            data: page.data,
            has_more: page.nextCursor !== null,
            next_cursor: page.nextCursor
          }))
        )
      )
      .handle("delivery", ({ params }) => Effect.flatMap(owner, (o) => deliveries.get(o, params.did)))
      .handle("replay", ({ params }) => Effect.flatMap(owner, (o) => deliveries.replay(o, params.did)))
      .handle("discard", ({ params }) => Effect.flatMap(owner, (o) => deliveries.discard(o, params.did)))
  })
)
