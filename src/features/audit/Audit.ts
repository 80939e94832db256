import { AuditConfig } from "./AuditConfig.ts"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type * as Statement from "effect/sql/Statement"
import * as Crypto from "node:crypto"
import { CurrentOrigin } from "../policy/AuthMiddleware.ts"
import * as Housekeeping from "../../platform/work/Housekeeping.ts"
import type { AuditEvent, AuditEventList } from "../../kernel/Audit.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import { storableText } from "../../kernel/Validation.ts"
import { actorOf, type Owner, type Principal } from "../../kernel/Owner.ts"
import * as Sql from "../../platform/db/Sql.ts"

/** What a mutation records. `action` is `<resource>.<verb>`, e.g. `api_key.revoked`. */
export interface AuditEntry {
  readonly action: string
  readonly targetType: string
  readonly targetId: string | null
  readonly outcome?: "success" | "failure"
  /** Non-secret facts about the change (a role, a key prefix, scopes). */
  readonly details?: Record<string, unknown>
}

export interface AuditQuery {
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
  /** An actor id: a user, key or service account id. */
  readonly actor?: string | undefined
  /** An exact action, or a prefix ending in `.` (`api_key.`). */
  readonly action?: string | undefined
  readonly target?: string | undefined
  readonly outcome?: string | undefined
  readonly from?: Date | undefined
  readonly to?: Date | undefined
}

const Row = Schema.Struct({
  id: Schema.String,
  occurred_at: Schema.Date,
  actor_type: Schema.Literals(["user", "api_key", "service_account", "system", "assistant"]),
  actor_id: Schema.NullOr(Schema.String),
  actor_user_id: Schema.NullOr(Schema.String),
  action: Schema.String,
  target_type: Schema.String,
  target_id: Schema.NullOr(Schema.String),
  ip: Schema.NullOr(Schema.String),
  user_agent: Schema.NullOr(Schema.String),
  outcome: Schema.Literals(["success", "failure"]),
  details: Schema.Record(Schema.String, Schema.Unknown)
})

const PURGE_BATCH = 5_000

const CursorCodec = Schema.StringFromBase64Url.pipe(
  Schema.decodeTo(Schema.fromJsonString(Schema.Tuple([Schema.DateFromString, Schema.String])))
)

const toEvent = (row: typeof Row.Type): AuditEvent => ({
  id: row.id,
  occurred_at: row.occurred_at,
  actor: { type: row.actor_type, id: row.actor_id, user_id: row.actor_user_id },
  action: row.action,
  target: { type: row.target_type, id: row.target_id },
  ip: row.ip,
  user_agent: row.user_agent,
  outcome: row.outcome,
  details: row.details
})

/**
 * The audit trail of each account. `record` runs on the caller's connection,
 * so inside a transaction the event commits or rolls back with the change.
 */
// What a caller sent (a target id, its user agent, a refusal's details) is recorded as Postgres can
// store it: an event is never lost, nor a request failed, for a U+0000 in it.
const storableOrNull = (text: string | null | undefined) =>
  text === null || text === undefined ? null : storableText(text)
const storableStrings = (_key: string, value: unknown) =>
  typeof value === "string" ? storableText(value) : value

export class Audit extends Context.Service<
  Audit,
  {
    readonly record: (owner: Owner, entry: AuditEntry) => Effect.Effect<void>
    /**
     * `record` as a part of the statement that makes the change (the CTE `name` of a `WITH`
     * list), in the same round trip: an event for each row of the CTE `when`, in the account of
     * its `account_id`, done by `principal`.
     */
    readonly recordPart: (
      name: string,
      when: string,
      principal: Principal,
      entry: AuditEntry
    ) => Effect.Effect<Statement.Fragment>
    readonly list: (accountId: string, query: AuditQuery) => Effect.Effect<AuditEventList, InvalidField>
    /** Deletes events older than the retention; the number removed. */
    readonly purge: Effect.Effect<number>
  }
>()("rbs/audit/Audit") {
  static readonly layer = Layer.effect(
    Audit,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const config = yield* AuditConfig

      const record = Effect.fn("Audit.record")(function* (owner: Owner, entry: AuditEntry) {
        const origin = yield* CurrentOrigin
        const actor = actorOf(owner.principal)
        const at = new Date(yield* Clock.currentTimeMillis)
        yield* sql`
          INSERT INTO audit_events (id, account_id, occurred_at, actor_type, actor_id, actor_user_id, action,
            target_type, target_id, ip, user_agent, outcome, details)
          VALUES (${Crypto.randomUUID()}, ${owner.accountId}, ${at}, ${actor.type}, ${actor.id}, ${actor.userId},
            ${entry.action}, ${entry.targetType}, ${storableOrNull(entry.targetId)}, ${origin.ip},
            ${storableOrNull(origin.userAgent)}, ${entry.outcome ?? "success"},
            ${JSON.stringify(entry.details ?? {}, storableStrings)}::jsonb)`.pipe(Sql.orDefect)
      })

      const recordPart = (name: string, when: string, principal: Principal, entry: AuditEntry) =>
        Effect.gen(function* () {
          const origin = yield* CurrentOrigin
          const actor = actorOf(principal)
          const at = new Date(yield* Clock.currentTimeMillis)
          return sql`
            ${sql(name)} AS (
              INSERT INTO audit_events (id, account_id, occurred_at, actor_type, actor_id, actor_user_id, action,
                target_type, target_id, ip, user_agent, outcome, details)
              SELECT ${Crypto.randomUUID()}::uuid, w.account_id, ${at}::timestamptz, ${actor.type}::text,
                ${actor.id}::text, ${actor.userId}::uuid, ${entry.action}::text, ${entry.targetType}::text,
                ${storableOrNull(entry.targetId)}::text, ${origin.ip}::text, ${storableOrNull(origin.userAgent)}::text,
                ${entry.outcome ?? "success"}::text, ${JSON.stringify(entry.details ?? {}, storableStrings)}::jsonb
              FROM ${sql(when)} w
            )`
        })

      const list = Effect.fn("Audit.list")(function* (accountId: string, query: AuditQuery) {
        const limit = query.limit ?? 50
        if (!Number.isInteger(limit) || limit < 1 || limit > 200)
          return yield* new InvalidField({ field: "limit" })
        const cursor =
          query.cursor === undefined
            ? undefined
            : yield* Schema.decodeUnknownEffect(CursorCodec)(query.cursor).pipe(
                Effect.mapError(() => new InvalidField({ field: "cursor" }))
              )
        const conditions = [sql`account_id = ${accountId}`]
        if (query.actor !== undefined) {
          conditions.push(sql`(actor_id = ${query.actor} OR actor_user_id::text = ${query.actor})`)
        }
        if (query.action !== undefined) {
          conditions.push(
            query.action.endsWith(".")
              ? sql`starts_with(action, ${query.action})`
              : sql`action = ${query.action}`
          )
        }
        if (query.target !== undefined) conditions.push(sql`target_id = ${query.target}`)
        if (query.outcome !== undefined) {
          if (query.outcome !== "success" && query.outcome !== "failure") {
            return yield* new InvalidField({ field: "outcome" })
          }
          conditions.push(sql`outcome = ${query.outcome}`)
        }
        if (query.from !== undefined) conditions.push(sql`occurred_at >= ${query.from}`)
        if (query.to !== undefined) conditions.push(sql`occurred_at < ${query.to}`)
        if (cursor !== undefined) conditions.push(sql`(occurred_at, id) < (${cursor[0]}, ${cursor[1]}::uuid)`)
        const rows = yield* sql`
          SELECT * FROM audit_events WHERE ${sql.and(conditions)}
          ORDER BY occurred_at DESC, id DESC LIMIT ${limit + 1}`.pipe(
          Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(Row))),
          Sql.orDefect
        )
        const page = rows.slice(0, limit)
        const last = page.at(-1)
        const hasMore = rows.length > limit
        return {
          object: "list" as const,
          data: page.map(toEvent),
          has_more: hasMore,
          next_cursor:
            hasMore && last !== undefined
              ? Schema.encodeSync(CursorCodec)([last.occurred_at, last.id] as const)
              : null
        }
      })

      // In batches, so a first purge of a large backlog holds no long lock.
      const purgeBatch = (cutoff: Date) =>
        sql<{ readonly removed: number }>`
          WITH gone AS (
            DELETE FROM audit_events WHERE id IN (
              SELECT id FROM audit_events WHERE occurred_at < ${cutoff} LIMIT ${PURGE_BATCH})
            RETURNING 1)
          SELECT count(*)::int AS removed FROM gone`.pipe(
          Effect.map((rows) => rows[0]?.removed ?? 0),
          Sql.orDefect
        )

      const purge = Effect.gen(function* () {
        const cutoff = new Date((yield* Clock.currentTimeMillis) - config.auditRetentionDays * 86_400_000)
        let total = 0
        while (true) {
          const removed = yield* purgeBatch(cutoff)
          total += removed
          if (removed < PURGE_BATCH) return total
        }
      })

      return Audit.of({ record, recordPart, list, purge })
    })
  )

  /** Removes events past `AUDIT_RETENTION_DAYS` once an hour. */
  static readonly layerRetention = Layer.effectDiscard(
    Effect.gen(function* () {
      const audit = yield* Audit
      yield* Housekeeping.every(
        { name: "audit", interval: "1 hour", removed: (events) => ({ events }) },
        audit.purge
      ).pipe(Effect.forkScoped)
    })
  )
}
