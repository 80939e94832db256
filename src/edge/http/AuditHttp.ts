import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import { Audit } from "../../features/audit/Audit.ts"

const date = (field: string, value: string | undefined) => {
  if (value === undefined) return Effect.succeed(undefined)
  const parsed = new Date(value)
  return Number.isNaN(parsed.getTime()) ? Effect.fail(new InvalidField({ field })) : Effect.succeed(parsed)
}

export const AuditHttp = HttpApiBuilder.group(
  Api,
  "audit",
  Effect.fn(function* (handlers) {
    const audit = yield* Audit
    return handlers.handle("list", ({ query }) =>
      Effect.gen(function* () {
        const owner = yield* CurrentOwner
        const limit = query.limit === undefined ? undefined : Number(query.limit)
        return yield* audit.list(owner.accountId, {
          limit,
          cursor: query.cursor,
          actor: query.actor,
          action: query.action,
          target: query.target,
          outcome: query.outcome,
          from: yield* date("from", query.from),
          to: yield* date("to", query.to)
        })
      })
    )
  })
)
