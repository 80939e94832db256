import { Clock, Context, Effect, Layer } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import {
  type AssistantNotFound,
  type UsageEventRequest,
  type UsageEventInfo
} from "../../kernel/Assistant.ts"
import { newestFirst } from "../../platform/db/Paging.ts"
import { isUuid } from "../../kernel/Ids.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { findAssistantRow } from "./AssistantRows.ts"

const MAX_METADATA_BYTES = 4 * 1024
/** The furthest in the past an event may say it happened. */
const MAX_AGE_MS = 24 * 3600 * 1000
const DEFAULT_PAGE = 50
const MAX_PAGE = 200

interface UsageEventRow {
  readonly id: string
  readonly assistant_id: string
  readonly model: string
  readonly input_tokens: string | number
  readonly output_tokens: string | number
  readonly cost_micro_usd: string | number | null
  readonly metadata: Record<string, unknown>
  readonly occurred_at: Date
  readonly created_at: Date
}

const infoOf = (row: UsageEventRow): UsageEventInfo => ({
  id: row.id,
  object: "assistant_usage_event",
  assistant_id: row.assistant_id,
  model: row.model,
  input_tokens: Number(row.input_tokens),
  output_tokens: Number(row.output_tokens),
  cost_micro_usd: row.cost_micro_usd === null ? null : Number(row.cost_micro_usd),
  metadata: row.metadata,
  occurred_at: row.occurred_at,
  created_at: row.created_at
})

/** One assistant's figures for the usage report's period. */
export interface AssistantUsageTotals {
  readonly assistant_id: string
  readonly name: string
  readonly events: number
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cost_micro_usd: number
}

/**
 * What an assistant's runtime reports of its model use (tokens, cost): kept
 * per event, paged newest first, and summed per assistant in `/v1/usage`.
 */
export class AssistantUsage extends Context.Service<
  AssistantUsage,
  {
    readonly record: (
      owner: Owner,
      assistantId: string,
      input: UsageEventRequest
    ) => Effect.Effect<UsageEventInfo, InvalidField | AssistantNotFound>
    readonly list: (
      owner: Owner,
      assistantId: string,
      query: { readonly limit?: number | undefined; readonly cursor?: string | undefined }
    ) => Effect.Effect<
      {
        readonly data: ReadonlyArray<UsageEventInfo>
        readonly has_more: boolean
        readonly next_cursor: string | null
      },
      InvalidField | AssistantNotFound
    >
    readonly totals: (
      accountId: string,
      from: Date,
      to: Date
    ) => Effect.Effect<ReadonlyArray<AssistantUsageTotals>>
  }
>()("rbs/assistants/AssistantUsage") {
  static readonly layer = Layer.effect(
    AssistantUsage,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const findRow = findAssistantRow(sql)

      const record = Effect.fn("AssistantUsage.record")(function* (
        owner: Owner,
        assistantId: string,
        input: UsageEventRequest
      ) {
        yield* findRow(owner, assistantId)
        const at = new Date(yield* Clock.currentTimeMillis)
        if (input.model.length === 0 || input.model.length > 200)
          return yield* new InvalidField({ field: "model" })
        if (input.input_tokens < 0) return yield* new InvalidField({ field: "input_tokens" })
        if (input.output_tokens < 0) return yield* new InvalidField({ field: "output_tokens" })
        if (input.cost_usd !== undefined && (input.cost_usd < 0 || input.cost_usd > 1_000_000))
          return yield* new InvalidField({ field: "cost_usd" })
        const metadata = input.metadata ?? {}
        if (Buffer.byteLength(JSON.stringify(metadata)) > MAX_METADATA_BYTES)
          return yield* new InvalidField({ field: "metadata" })
        const occurredAt = input.occurred_at === undefined ? at : new Date(input.occurred_at)
        if (
          Number.isNaN(occurredAt.getTime()) ||
          occurredAt.getTime() > at.getTime() + 60_000 ||
          occurredAt.getTime() < at.getTime() - MAX_AGE_MS
        )
          return yield* new InvalidField({ field: "occurred_at" })
        const [row] = yield* sql<UsageEventRow>`
          INSERT INTO assistant_usage_events (id, assistant_id, account_id, model, input_tokens, output_tokens,
            cost_micro_usd, metadata, occurred_at, created_at)
          VALUES (${Crypto.randomUUID()}, ${assistantId}, ${owner.accountId}, ${input.model}, ${input.input_tokens},
            ${input.output_tokens}, ${input.cost_usd === undefined ? null : Math.round(input.cost_usd * 1_000_000)},
            ${JSON.stringify(metadata)}::jsonb, ${occurredAt}, ${at})
          RETURNING *`.pipe(Sql.orDefect)
        return infoOf(row!)
      })

      const list = Effect.fn("AssistantUsage.list")(function* (
        owner: Owner,
        assistantId: string,
        query: { readonly limit?: number | undefined; readonly cursor?: string | undefined }
      ) {
        yield* findRow(owner, assistantId)
        const limit = query.limit ?? DEFAULT_PAGE
        if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
          return yield* new InvalidField({ field: "limit" })
        const page = yield* newestFirst(
          sql,
          { cursor: query.cursor, limit },
          ({ after, orderAndLimit }) =>
            sql<UsageEventRow>`
            SELECT * FROM assistant_usage_events WHERE ${sql.and([sql`assistant_id = ${assistantId}`, ...after])}
            ${orderAndLimit}`.pipe(Sql.orDefect),
          isUuid
        )
        return {
          data: page.rows.map(infoOf),
          has_more: page.nextCursor !== null,
          next_cursor: page.nextCursor
        }
      })

      const totals = (accountId: string, from: Date, to: Date) =>
        sql<{
          readonly assistant_id: string
          readonly name: string
          readonly events: string
          readonly input_tokens: string
          readonly output_tokens: string
          readonly cost_micro_usd: string
        }>`
          SELECT e.assistant_id, a.name, count(*) AS events, sum(e.input_tokens) AS input_tokens,
            sum(e.output_tokens) AS output_tokens, coalesce(sum(e.cost_micro_usd), 0) AS cost_micro_usd
          FROM assistant_usage_events e JOIN assistants a ON a.id = e.assistant_id
          WHERE e.account_id = ${accountId} AND e.occurred_at >= ${from} AND e.occurred_at < ${to}
          GROUP BY e.assistant_id, a.name ORDER BY sum(e.input_tokens + e.output_tokens) DESC`.pipe(
          Sql.orDefect,
          Effect.map((rows) =>
            rows.map((row) => ({
              assistant_id: row.assistant_id,
              name: row.name,
              events: Number(row.events),
              input_tokens: Number(row.input_tokens),
              output_tokens: Number(row.output_tokens),
              cost_micro_usd: Number(row.cost_micro_usd)
            }))
          )
        )

      return AssistantUsage.of({ record, list, totals })
    })
  )
}
