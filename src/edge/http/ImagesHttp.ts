import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { AccountImages } from "../../features/images/AccountImages.ts"

export const ImagesHttp = HttpApiBuilder.group(
  Api,
  "images",
  Effect.fn(function* (handlers) {
    const images = yield* AccountImages
    return handlers
      .handle("create", ({ payload }) =>
        Effect.flatMap(CurrentOwner, (owner) => images.create(owner, payload))
      )
      .handle("list", ({ query }) =>
        Effect.flatMap(CurrentOwner, (owner) =>
          Effect.map(images.list(owner, { cursor: query.cursor, limit: query.limit ?? 20 }), (page) => ({
            object: "list" as const,
            data: page.data,
            has_more: page.nextCursor !== null,
            next_cursor: page.nextCursor
          }))
        )
      )
      .handle("get", ({ params }) => Effect.flatMap(CurrentOwner, (owner) => images.get(owner, params.id)))
      .handle("delete", ({ params }) =>
        Effect.flatMap(CurrentOwner, (owner) => images.remove(owner, params.id))
      )
  })
)
