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
  ),
  assistants: Schema.Array(
    Schema.Struct({
      assistant_id: Schema.String,
      name: Schema.String,
      events: Schema.Number,
      input_tokens: Schema.Number,
      output_tokens: Schema.Number,
      cost_micro_usd: Schema.Number
    })
  ).annotate({
    description:
      "The model use each assistant's runtime reported in the period (`POST /v1/assistants/{id}/usage-events`), most tokens first; its provider's cost as reported, not billed here."
  })
})
export type UsageReport = typeof UsageReport.Type
