import { Clock, Context, Effect, Layer } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import { type AssistantNotFound } from "../../kernel/Assistant.ts"
import {
  type ConfigIntentInfo,
  type DecideIntentRequest,
  DEFAULT_INTENT_TTL_SECONDS,
  IntentConflict,
  IntentNotFound,
  MAX_INTENT_TTL_SECONDS,
  type ProposeIntentRequest
} from "../../kernel/AssistantIntent.ts"
import { newestFirst } from "../../platform/db/Paging.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import { isUuid } from "../../kernel/Ids.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import { checkConfig, findAssistantRow, jsonBytes } from "./AssistantRows.ts"
import { wakeSupervisor } from "./AssistantWake.ts"
import {
  actorName,
  type IntentRow,
  intentEventData,
  intentInfoOf,
  mergePatch,
  statusAt
} from "./IntentRows.ts"

const MAX_TEXT = 2000
const DEFAULT_PAGE = 20
const MAX_PAGE = 100

/**
 * Config intents (`/v2/assistants/{id}/config-intents`): a change to an
 * assistant's `config` that its runtime (or a member) proposes and a member
 * with `accounts.admin` (an admin or owner) approves or denies. Approval
 * applies the merge patch in one transaction, only on the config version it
 * was proposed on; an intent nobody decides expires (`IntentExpiry`). Each
 * step is audited and sent as a webhook event (`config_intent.*`).
 */
export class AssistantIntents extends Context.Service<
  AssistantIntents,
  {
    readonly propose: (
      owner: Owner,
      assistantId: string,
      input: ProposeIntentRequest
    ) => Effect.Effect<ConfigIntentInfo, AssistantNotFound | InvalidField>
    readonly list: (
      owner: Owner,
      assistantId: string,
      query: {
        readonly limit?: number | undefined
        readonly cursor?: string | undefined
        readonly status?: string | undefined
      }
    ) => Effect.Effect<
      {
        readonly data: ReadonlyArray<ConfigIntentInfo>
        readonly has_more: boolean
        readonly next_cursor: string | null
      },
      AssistantNotFound | InvalidField
    >
    readonly get: (
      owner: Owner,
      assistantId: string,
      intentId: string
    ) => Effect.Effect<ConfigIntentInfo, AssistantNotFound | IntentNotFound>
    readonly decide: (
      owner: Owner,
      assistantId: string,
      intentId: string,
      decision: "approved" | "denied",
      input: DecideIntentRequest
    ) => Effect.Effect<ConfigIntentInfo, AssistantNotFound | IntentNotFound | IntentConflict | InvalidField>
  }
>()("rbs/assistants/AssistantIntents") {
  static readonly layer = Layer.effect(
    AssistantIntents,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* Audit
      const outbox = yield* WebhookOutbox
      const findRow = findAssistantRow(sql)
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const propose = Effect.fn("AssistantIntents.propose")(function* (
        owner: Owner,
        assistantId: string,
        input: ProposeIntentRequest
      ) {
        const assistant = yield* findRow(owner, assistantId)
        if (jsonBytes(input.patch) > 64 * 1024 || Object.keys(input.patch).length === 0)
          return yield* new InvalidField({ field: "patch" })
        // What it would make must be a config the runtime can start from.
        yield* checkConfig(mergePatch(assistant.config, input.patch) as Record<string, unknown>).pipe(
          Effect.mapError(() => new InvalidField({ field: "patch" }))
        )
        if (input.reason !== undefined && input.reason.length > MAX_TEXT)
          return yield* new InvalidField({ field: "reason" })
        const ttl = input.expires_in_seconds ?? DEFAULT_INTENT_TTL_SECONDS
        if (ttl < 60 || ttl > MAX_INTENT_TTL_SECONDS)
          return yield* new InvalidField({ field: "expires_in_seconds" })
        const at = yield* now
        const row = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const [inserted] = yield* sql<IntentRow>`
                INSERT INTO assistant_config_intents (id, assistant_id, account_id, patch, reason, base_version, status,
                  proposed_by, created_at, expires_at)
                VALUES (${Crypto.randomUUID()}, ${assistantId}, ${owner.accountId}, ${JSON.stringify(input.patch)}::jsonb,
                  ${input.reason ?? null}, ${assistant.config_version}, 'pending', ${actorName(owner)}, ${at},
                  ${new Date(at.getTime() + ttl * 1000)})
                RETURNING *`
              yield* audit.record(owner, {
                action: "config_intent.proposed",
                targetType: "assistant",
                targetId: assistantId,
                details: { intent_id: inserted!.id, base_version: assistant.config_version }
              })
              yield* outbox.emit(owner.accountId, "config_intent.proposed", intentEventData(inserted!))
              // The sweeps sleep until the next expiry they know of: this one may come first.
              yield* wakeSupervisor(sql)
              return inserted!
            })
          )
          .pipe(Sql.orDefect)
        return intentInfoOf(row, at.getTime())
      })

      const list = Effect.fn("AssistantIntents.list")(function* (
        owner: Owner,
        assistantId: string,
        query: {
          readonly limit?: number | undefined
          readonly cursor?: string | undefined
          readonly status?: string | undefined
        }
      ) {
        yield* findRow(owner, assistantId)
        const limit = query.limit ?? DEFAULT_PAGE
        if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
          return yield* new InvalidField({ field: "limit" })
        if (
          query.status !== undefined &&
          !["pending", "approved", "denied", "expired"].includes(query.status)
        )
          return yield* new InvalidField({ field: "status" })
        const at = yield* now
        const page = yield* newestFirst(
          sql,
          { cursor: query.cursor, limit },
          ({ after, orderAndLimit }) =>
            sql<IntentRow>`
            SELECT * FROM assistant_config_intents
            WHERE ${sql.and([
              sql`assistant_id = ${assistantId}`,
              ...(query.status === undefined ? [] : [statusIs(query.status, at)]),
              ...after
            ])}
            ${orderAndLimit}`.pipe(Sql.orDefect),
          isUuid
        )
        return {
          data: page.rows.map((row) => intentInfoOf(row, at.getTime())),
          has_more: page.nextCursor !== null,
          next_cursor: page.nextCursor
        }
      })

      /** The status as reads show it (`statusAt`): a pending intent past its time is expired. */
      const statusIs = (status: string, at: Date) =>
        status === "pending"
          ? sql`(status = 'pending' AND expires_at > ${at})`
          : status === "expired"
            ? sql`(status = 'expired' OR (status = 'pending' AND expires_at <= ${at}))`
            : sql`status = ${status}`

      const findIntent = (assistantId: string, intentId: string, lock: boolean) =>
        Effect.gen(function* () {
          if (!isUuid(intentId)) return yield* new IntentNotFound()
          const [row] = yield* sql<IntentRow>`
            SELECT * FROM assistant_config_intents WHERE id = ${intentId} AND assistant_id = ${assistantId}
            ${lock ? sql`FOR UPDATE` : sql``}`.pipe(Sql.orDefect)
          if (row === undefined) return yield* new IntentNotFound()
          return row
        })

      const get = Effect.fn("AssistantIntents.get")(function* (
        owner: Owner,
        assistantId: string,
        intentId: string
      ) {
        yield* findRow(owner, assistantId)
        const row = yield* findIntent(assistantId, intentId, false)
        return intentInfoOf(row, yield* Clock.currentTimeMillis)
      })

      const decide = Effect.fn("AssistantIntents.decide")(function* (
        owner: Owner,
        assistantId: string,
        intentId: string,
        decision: "approved" | "denied",
        input: DecideIntentRequest
      ) {
        yield* findRow(owner, assistantId)
        if (input.note !== undefined && input.note.length > MAX_TEXT)
          return yield* new InvalidField({ field: "note" })
        const decided = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const locked = yield* findIntent(assistantId, intentId, true)
              // Past its time (read once it is locked) it is expired, whether or not the sweep wrote so yet.
              const at = yield* now
              const intent = statusAt(locked, at.getTime())
              if (intent.status !== "pending")
                return yield* new IntentConflict({ detail: `The intent is ${intent.status} already.` })
              let applied: number | null = null
              if (decision === "approved") {
                const [assistant] = yield* sql<{
                  readonly config: Record<string, unknown>
                  readonly config_version: number
                }>`
                  SELECT config, config_version FROM assistants WHERE id = ${assistantId} FOR UPDATE`.pipe(
                  Sql.orDefect
                )
                if (assistant!.config_version !== intent.base_version)
                  return yield* new IntentConflict({
                    detail: `The assistant's config changed since the intent was proposed (version ${intent.base_version}, now ${assistant!.config_version}): deny it and propose again.`
                  })
                const config = mergePatch(assistant!.config, intent.patch) as Record<string, unknown>
                const [updated] = yield* sql<{ readonly config_version: number }>`
                  UPDATE assistants SET config = ${JSON.stringify(config)}::jsonb, config_version = config_version + 1,
                    updated_at = ${at}
                  WHERE id = ${assistantId} RETURNING config_version`.pipe(Sql.orDefect)
                applied = updated!.config_version
              }
              const [row] = yield* sql<IntentRow>`
                UPDATE assistant_config_intents SET status = ${decision}, decided_by = ${actorName(owner)},
                  decided_at = ${at}, decision_note = ${input.note ?? null}, applied_version = ${applied}
                WHERE id = ${intentId} RETURNING *`.pipe(Sql.orDefect)
              yield* audit.record(owner, {
                action: decision === "approved" ? "config_intent.approved" : "config_intent.denied",
                targetType: "assistant",
                targetId: assistantId,
                details: { intent_id: intentId, ...(applied === null ? {} : { applied_version: applied }) }
              })
              yield* outbox.emit(
                owner.accountId,
                decision === "approved" ? "config_intent.approved" : "config_intent.denied",
                intentEventData(row!)
              )
              return row!
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))
        return intentInfoOf(decided, yield* Clock.currentTimeMillis)
      })

      return AssistantIntents.of({ propose, list, get, decide })
    })
  )
}
