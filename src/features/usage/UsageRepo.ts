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
      // Summed per region, key and day first (the index covers every column read), then named.
      const groups = (accountId: string, from: Date, to: Date) =>
        sql`
          SELECT g.region, g.api_key_id, k.prefix AS key_prefix, k.name AS key_name, g.day::text AS day,
            g.sessions, g.bytes_up, g.bytes_down, g.billed
          FROM (
            SELECT region, api_key_id, (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS sessions,
              sum(bytes_up)::bigint AS bytes_up, sum(bytes_down)::bigint AS bytes_down,
              sum(billed_micro_usd)::bigint AS billed
            FROM sessions
            WHERE account_id = ${accountId} AND created_at >= ${from} AND created_at < ${to}
            GROUP BY 1, 2, 3
          ) g LEFT JOIN api_keys k ON k.id = g.api_key_id`.pipe(decodeGroups, Effect.orDie)
      return UsageRepo.of({ groups })
    })
  )
}
