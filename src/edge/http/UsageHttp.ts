import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { Usage } from "../../features/usage/Usage.ts"

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
