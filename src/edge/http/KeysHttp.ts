import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { ApiKeys } from "../../features/identity/ApiKeys.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"

export const KeysHttp = HttpApiBuilder.group(
  Api,
  "keys",
  Effect.fn(function* (handlers) {
    const keys = yield* ApiKeys
    return handlers
      .handle("create", ({ payload }) => Effect.flatMap(CurrentOwner, (owner) => keys.create(owner, payload)))
      .handle("list", () =>
        Effect.flatMap(CurrentOwner, (owner) => Effect.map(keys.list(owner), (list) => ({ keys: list })))
      )
      .handle("revoke", ({ params }) =>
        Effect.flatMap(CurrentOwner, (owner) => keys.revoke(owner, params.key_id))
      )
      .handle("rotate", ({ params, payload }) =>
        Effect.flatMap(CurrentOwner, (owner) => keys.rotate(owner, params.key_id, payload?.grace_days))
      )
  })
)
