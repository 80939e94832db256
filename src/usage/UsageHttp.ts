import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { CurrentAccount } from "../auth/AuthMiddleware.ts"
import { Usage } from "./Usage.ts"

export const UsageHttp = HttpApiBuilder.group(
  Api,
  "usage",
  Effect.fn(function* (handlers) {
    const usage = yield* Usage
    return handlers.handle("current", () =>
      Effect.flatMap(CurrentAccount, (account) => usage.current(account.accountId))
    )
  })
)
