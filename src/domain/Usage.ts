import { Schema } from "effect"

export const UsageReport = Schema.Struct({
  period: Schema.Literal("current"),
  from: Schema.DateFromString,
  to: Schema.DateFromString,
  totals: Schema.Struct({
    bytes_up: Schema.Number,
    bytes_down: Schema.Number,
    bytes_total: Schema.Number,
    sessions: Schema.Number,
    billed_micro_usd: Schema.Number
  }),
  by_region: Schema.Array(
    Schema.Struct({
      region: Schema.String,
      sessions: Schema.Number,
      bytes_total: Schema.Number,
      billed_micro_usd: Schema.Number
    })
  ),
  by_key: Schema.Array(
    Schema.Struct({
      key_id: Schema.NullOr(Schema.String),
      key_prefix: Schema.NullOr(Schema.String),
      key_name: Schema.NullOr(Schema.String),
      sessions: Schema.Number,
      bytes_total: Schema.Number,
      billed_micro_usd: Schema.Number
    })
  ),
  by_day: Schema.Array(
    Schema.Struct({
      date: Schema.String,
      bytes_total: Schema.Number,
      sessions: Schema.Number
    })
  )
})
export type UsageReport = typeof UsageReport.Type
