import { Context, Effect, Layer, Schema } from "effect"
import { ApiKeysRepo } from "../identity/ApiKeysRepo.ts"
import { SessionsRepo } from "../sessions/SessionsRepo.ts"

/** One group of an account's sessions: same region, key and UTC day. */
export const UsageGroup = Schema.Struct({
  region: Schema.String,
  api_key_id: Schema.NullOr(Schema.String),
  key_prefix: Schema.NullOr(Schema.String),
  key_name: Schema.NullOr(Schema.String),
  day: Schema.String,
  sessions: Schema.BigInt,
  bytes_up: Schema.BigInt,
  bytes_down: Schema.BigInt,
  billed: Schema.BigInt
})
export type UsageGroup = typeof UsageGroup.Type

export class UsageRepo extends Context.Service<
  UsageRepo,
  {
    /** The account's sessions created in `[from, to)`, grouped by region, key and UTC day. */
    readonly groups: (accountId: string, from: Date, to: Date) => Effect.Effect<ReadonlyArray<UsageGroup>>
  }
>()("rbs/usage/UsageRepo") {
  static readonly layer = Layer.effect(
    UsageRepo,
    Effect.gen(function* () {
      const sessions = yield* SessionsRepo
      const keys = yield* ApiKeysRepo
      // Summed by the sessions' owner, then named by the keys' owner.
      const groups = (accountId: string, from: Date, to: Date) =>
        Effect.gen(function* () {
          const summed = yield* sessions.usage(accountId, from, to)
          const ids = [
            ...new Set(summed.flatMap((group) => (group.api_key_id === null ? [] : [group.api_key_id])))
          ]
          const labels = yield* keys.labels(ids)
          return summed.map((group): UsageGroup => {
            const label = group.api_key_id === null ? undefined : labels.get(group.api_key_id)
            return { ...group, key_prefix: label?.prefix ?? null, key_name: label?.name ?? null }
          })
        })
      return UsageRepo.of({ groups })
    })
  )
}
