import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"

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

const decodeGroups = Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(UsageGroup)))

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
      const sql = yield* SqlClient.SqlClient
      // Served by sessions_usage_idx (account, created_at) with the summed columns included.
      const groups = (accountId: string, from: Date, to: Date) =>
        sql`
          SELECT s.region, s.api_key_id, k.prefix AS key_prefix, k.name AS key_name,
            to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
            count(*) AS sessions, sum(s.bytes_up)::bigint AS bytes_up, sum(s.bytes_down)::bigint AS bytes_down,
            sum(s.billed_micro_usd)::bigint AS billed
          FROM sessions s LEFT JOIN api_keys k ON k.id = s.api_key_id
          WHERE s.account_id = ${accountId} AND s.created_at >= ${from} AND s.created_at < ${to}
          GROUP BY s.region, s.api_key_id, k.prefix, k.name, day`.pipe(decodeGroups, Effect.orDie)
      return UsageRepo.of({ groups })
    })
  )
}
