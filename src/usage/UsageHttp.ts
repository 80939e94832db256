import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { CurrentOwner } from "../auth/AuthMiddleware.ts"
import { Usage } from "./Usage.ts"

export const UsageHttp = HttpApiBuilder.group(
  Api,
  "usage",
  Effect.fn(function* (handlers) {
    const usage = yield* Usage
    return handlers.handle("current", () =>
      Effect.flatMap(CurrentOwner, (owner) => usage.current(owner.accountId))
    )
  })
)
