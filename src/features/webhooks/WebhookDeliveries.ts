import * as Housekeeping from "../../platform/work/Housekeeping.ts"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { Audit } from "../audit/Audit.ts"
import { newestFirst } from "../../platform/db/Paging.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import type { Owner } from "../../kernel/Owner.ts"
import {
  DeliveryConflict,
  DeliveryNotFound,
  type DeliveryState,
  type WebhookDelivery,
  WebhookEventPayload
} from "../../kernel/Webhook.ts"
import { WAKE_CHANNEL } from "./Outbox.ts"
import * as Sql from "../../platform/db/Sql.ts"

/** How long finished deliveries (with their attempts) and their events are kept. */
export const RETENTION_MS = 30 * 86_400_000

const DeliveryRow = Schema.Struct({
  id: Schema.String,
  webhook_id: Schema.String,
  event_id: Schema.String,
  event_type: Schema.String,
  state: Schema.Literals(["pending", "delivering", "succeeded", "failed", "discarded"]),
  attempts: Schema.Number,
  next_attempt_at: Schema.NullOr(Schema.Date),
  last_status: Schema.NullOr(Schema.Number),
  created_at: Schema.Date,
  updated_at: Schema.Date
})
const decodeDeliveries = Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(DeliveryRow)))

const toDelivery = (row: typeof DeliveryRow.Type): WebhookDelivery => ({
  object: "webhook_delivery",
  ...row,
  // In flight is `delivering`; the lease is the engine's business.
  next_attempt_at: row.state === "pending" ? row.next_attempt_at : null
})

const AttemptRow = Schema.Struct({
  series: Schema.Number,
  number: Schema.Number,
  started_at: Schema.Date,
  finished_at: Schema.NullOr(Schema.Date),
  duration_ms: Schema.NullOr(Schema.Number),
  status_code: Schema.NullOr(Schema.Number),
  error: Schema.NullOr(Schema.String),
  response_excerpt: Schema.NullOr(Schema.String)
})

export interface DeliveryQuery {
  readonly webhook_id?: string | undefined
  readonly event_type?: string | undefined
  readonly state?: DeliveryState | undefined
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

/** The deliveries of an account's webhooks: listed, shown with their attempts, replayed, discarded, purged. */
export class WebhookDeliveries extends Context.Service<
  WebhookDeliveries,
  {
    readonly list: (
      owner: Owner,
      query: DeliveryQuery
    ) => Effect.Effect<
      { readonly data: ReadonlyArray<WebhookDelivery>; readonly nextCursor: string | null },
      InvalidField
    >
    readonly get: (
      owner: Owner,
      id: string
    ) => Effect.Effect<
      WebhookDelivery & {
        readonly payload: WebhookEventPayload | null
        readonly attempt_log: ReadonlyArray<typeof AttemptRow.Type>
      },
      DeliveryNotFound
    >
    readonly replay: (
      owner: Owner,
      id: string
    ) => Effect.Effect<WebhookDelivery, DeliveryNotFound | DeliveryConflict>
    readonly discard: (
      owner: Owner,
      id: string
    ) => Effect.Effect<WebhookDelivery, DeliveryNotFound | DeliveryConflict>
    /** Deletes deliveries finished more than `RETENTION_MS` ago, and events none refer to; answers how many. */
    readonly purge: Effect.Effect<number>
  }
>()("rbs/webhooks/WebhookDeliveries") {
  static readonly layer = Layer.effect(
    WebhookDeliveries,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* Audit
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const deliveries = Effect.fn("WebhookDeliveries.list")(function* (owner: Owner, query: DeliveryQuery) {
        const filters = [
          sql`account_id = ${owner.accountId}`,
          ...(query.webhook_id === undefined ? [] : [sql`webhook_id = ${query.webhook_id}`]),
          ...(query.event_type === undefined ? [] : [sql`event_type = ${query.event_type}`]),
          ...(query.state === undefined ? [] : [sql`state = ${query.state}`])
        ]
        const page = yield* newestFirst(
          sql,
          { cursor: query.cursor, limit: query.limit ?? 20 },
          ({ after, orderAndLimit }) =>
            sql`SELECT * FROM webhook_deliveries WHERE ${sql.and([...filters, ...after])} ${orderAndLimit}`.pipe(
              decodeDeliveries,
              Sql.orDefect
            )
        )
        return { data: page.rows.map(toDelivery), nextCursor: page.nextCursor }
      })

      const findDelivery = (owner: Owner, id: string) =>
        sql`SELECT * FROM webhook_deliveries WHERE account_id = ${owner.accountId} AND id = ${id}`.pipe(
          decodeDeliveries,
          Sql.orDefect,
          Effect.flatMap((rows) =>
            rows[0] === undefined ? Effect.fail(new DeliveryNotFound()) : Effect.succeed(rows[0])
          )
        )

      // One snapshot for the delivery and its attempts: read apart, a delivery still `delivering`
      // could be shown beside the attempt that already finished it.
      const snapshot = <A, E, R>(read: Effect.Effect<A, E, R>) =>
        sql
          .withTransaction(
            Effect.andThen(sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY`, read)
          )
          .pipe(Sql.orDefect)

      const delivery = (owner: Owner, id: string) => snapshot(readDelivery(owner, id))

      const readDelivery = Effect.fn("WebhookDeliveries.get")(function* (owner: Owner, id: string) {
        const row = yield* findDelivery(owner, id)
        const [event] = yield* sql<{
          id: string
          type: string
          created_at: Date
          account_id: string
          data: unknown
        }>`
          SELECT id, type, created_at, account_id, data FROM webhook_events WHERE id = ${row.event_id}`.pipe(
          Sql.orDefect
        )
        const attempts = yield* sql`
          SELECT series, number, started_at, finished_at, duration_ms, status_code, error, response_excerpt
          FROM webhook_attempts WHERE delivery_id = ${id} ORDER BY series, number`.pipe(
          Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(AttemptRow))),
          Sql.orDefect
        )
        return {
          ...toDelivery(row),
          payload: event === undefined ? null : yield* decodePayload(payloadOf(event)),
          attempt_log: attempts
        }
      })

      /** Moves a delivery of the owner's out of one of `from` with `update`, with its audit event. */
      const transition = (
        owner: Owner,
        id: string,
        action: "webhook_delivery.replayed" | "webhook_delivery.discarded",
        update: (at: Date, state: DeliveryState) => Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>,
        from: ReadonlyArray<DeliveryState>,
        refusal: string
      ) =>
        sql
          .withTransaction(
            Effect.gen(function* () {
              const current = yield* findDelivery(owner, id)
              if (!from.includes(current.state)) return yield* new DeliveryConflict({ detail: refusal })
              const [row] = yield* update(yield* now, current.state).pipe(decodeDeliveries)
              if (row === undefined) return yield* new DeliveryConflict({ detail: refusal })
              yield* audit.record(owner, {
                action,
                targetType: "webhook_delivery",
                targetId: id,
                details: { event_id: row.event_id, state_before: current.state }
              })
              yield* sql`SELECT pg_notify(${WAKE_CHANNEL}, '')`
              return toDelivery(row)
            })
          )
          .pipe(Sql.orDefect)

      const replay = (owner: Owner, id: string) =>
        transition(
          owner,
          id,
          "webhook_delivery.replayed",
          (at, state) => sql`
            UPDATE webhook_deliveries SET state = 'pending', series = series + 1, attempts = 0,
              next_attempt_at = ${at}, locked_until = NULL, locked_by = NULL, updated_at = ${at}
            WHERE id = ${id} AND state = ${state} RETURNING *`,
          ["pending", "succeeded", "failed", "discarded"],
          "An attempt of this delivery is in flight; replay it once it has an outcome."
        )

      const discard = (owner: Owner, id: string) =>
        transition(
          owner,
          id,
          "webhook_delivery.discarded",
          (at, state) => sql`
            UPDATE webhook_deliveries SET state = 'discarded', next_attempt_at = NULL, updated_at = ${at}
            WHERE id = ${id} AND state = ${state} RETURNING *`,
          ["pending", "delivering"],
          "This delivery has already finished; nothing is left to discard."
        )

      const purge = Effect.gen(function* () {
        const cutoff = new Date((yield* Clock.currentTimeMillis) - RETENTION_MS)
        const deleted = yield* sql<{ id: string }>`
          DELETE FROM webhook_deliveries
          WHERE state IN ('succeeded', 'failed', 'discarded') AND updated_at < ${cutoff} RETURNING id`
        yield* sql`
          DELETE FROM webhook_events e WHERE e.created_at < ${cutoff}
            AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)`
        return deleted.length
      }).pipe(Sql.orDefect)

      return WebhookDeliveries.of({ list: deliveries, get: delivery, replay, discard, purge })
    })
  )
}

/** A stored event as the API shows it; one that no longer fits its type's shape shows as null. */
const decodePayload = (payload: ReturnType<typeof payloadOf>) =>
  Schema.decodeUnknownEffect(WebhookEventPayload)(payload).pipe(
    Effect.tapError((error) =>
      Effect.logWarning("webhook.payload_unreadable", { eventId: payload.id, error })
    ),
    Effect.orElseSucceed(() => null)
  )

/** The body of a delivery (and its `payload` in the API). */
export const payloadOf = (event: {
  readonly id: string
  readonly type: string
  readonly created_at: Date
  readonly account_id: string
  readonly data: unknown
}) => ({
  id: event.id,
  type: event.type,
  created_at: event.created_at.toISOString(),
  account_id: event.account_id,
  data: event.data
})

/** Every hour, the purge of deliveries finished 30 days ago (idempotent: every node may run it). */
export const layerRetention = Layer.effectDiscard(
  Effect.gen(function* () {
    const deliveries = yield* WebhookDeliveries
    yield* Housekeeping.every(
      { name: "webhook", interval: "1 hour", removed: (deliveries) => ({ deliveries }) },
      deliveries.purge
    ).pipe(Effect.forkScoped)
  })
)
