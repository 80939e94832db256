import { Clock, Context, Effect, Layer, Redacted, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import { Secrets } from "../auth/Secrets.ts"
import { InvalidField } from "../domain/Errors.ts"
import type { Owner } from "../domain/Owner.ts"
import {
  type CreateWebhookRequest,
  type CustomerWebhookInfo,
  DeliveryConflict,
  DeliveryNotFound,
  type DeliveryState,
  WEBHOOK_EVENTS,
  type WebhookDelivery,
  WebhookEventPayload,
  WebhookNotFound,
  type WebhookWithSecret
} from "../domain/Webhook.ts"
import { Egress } from "../egress/Egress.ts"
import { WAKE_CHANNEL } from "./Outbox.ts"
import * as Signing from "./Signing.ts"
import { describeProblem, resolveTarget } from "./Targets.ts"

/** How long finished deliveries (with their attempts) and their events are kept. */
export const RETENTION_MS = 30 * 86_400_000

/** How long a rotated secret keeps signing beside its successor. */
export const ROTATION_GRACE_MS = 24 * 3_600_000

const WebhookRow = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  description: Schema.NullOr(Schema.String),
  secret_preview: Schema.String,
  disabled_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
  updated_at: Schema.Date
})
const decodeWebhooks = Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(WebhookRow)))

const toInfo = (row: typeof WebhookRow.Type): CustomerWebhookInfo => ({
  id: row.id,
  url: row.url,
  events: row.events,
  description: row.description,
  signing_secret_preview: row.secret_preview,
  created_at: row.created_at,
  updated_at: row.updated_at,
  disabled_at: row.disabled_at
})

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

/** The opaque cursor of the deliveries list: base64url of `[created_at, id]`. */
const Cursor = Schema.StringFromBase64Url.pipe(
  Schema.decodeTo(Schema.fromJsonString(Schema.Tuple([Schema.DateFromString, Schema.String])))
)

export interface DeliveryQuery {
  readonly webhook_id?: string | undefined
  readonly event_type?: string | undefined
  readonly state?: DeliveryState | undefined
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

/** The webhooks of an account and their deliveries: `/v1/webhooks`. */
export class Webhooks extends Context.Service<
  Webhooks,
  {
    readonly list: (owner: Owner) => Effect.Effect<ReadonlyArray<CustomerWebhookInfo>>
    readonly create: (
      owner: Owner,
      input: CreateWebhookRequest
    ) => Effect.Effect<WebhookWithSecret, InvalidField>
    readonly remove: (owner: Owner, id: string) => Effect.Effect<void, WebhookNotFound>
    /** A new secret, shown once; the old one keeps signing beside it for 24 hours. */
    readonly rotateSecret: (owner: Owner, id: string) => Effect.Effect<WebhookWithSecret, WebhookNotFound>
    readonly deliveries: (
      owner: Owner,
      query: DeliveryQuery
    ) => Effect.Effect<
      { readonly data: ReadonlyArray<WebhookDelivery>; readonly nextCursor: string | null },
      InvalidField
    >
    readonly delivery: (
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
>()("rbs/webhooks/Webhooks") {
  static readonly layer = Layer.effect(
    Webhooks,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* Audit
      const egress = yield* Egress
      const key = Redacted.value((yield* Secrets).secretsAtRestKey)
      const guard = { policy: egress.webhookPolicy, allowed: egress.webhookAllowed }
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const list = (owner: Owner) =>
        sql`SELECT * FROM webhooks WHERE account_id = ${owner.accountId} ORDER BY created_at, id`.pipe(
          decodeWebhooks,
          Effect.map((rows) => rows.map(toInfo)),
          Effect.orDie
        )

      const create = Effect.fn("Webhooks.create")(function* (owner: Owner, input: CreateWebhookRequest) {
        if (input.url.length > 2048) return yield* new InvalidField({ field: "url" })
        yield* resolveTarget(input.url, guard).pipe(
          Effect.tapError((problem) =>
            Effect.logInfo("webhook.url_refused", { reason: describeProblem(problem) })
          ),
          Effect.mapError(() => new InvalidField({ field: "url" }))
        )
        const events = [...new Set(input.events)]
        if (
          events.length === 0 ||
          events.some((event) => !(WEBHOOK_EVENTS as ReadonlyArray<string>).includes(event))
        )
          return yield* new InvalidField({ field: "events" })
        const description = input.description?.trim() || null
        if (description !== null && description.length > 500)
          return yield* new InvalidField({ field: "description" })
        const secret = Signing.newSecret()
        const at = yield* now
        const id = `wh_${Crypto.randomUUID()}`
        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const [row] = yield* sql`
                INSERT INTO webhooks (id, account_id, url, events, description, secret_ciphertext, secret_preview, created_at, updated_at)
                VALUES (${id}, ${owner.accountId}, ${input.url}, ${events}::text[], ${description},
                  ${Signing.encrypt(key, secret)}, ${Signing.preview(secret)}, ${at}, ${at})
                RETURNING *`.pipe(decodeWebhooks)
              yield* audit.record(owner, {
                action: "webhook.created",
                targetType: "webhook",
                targetId: id,
                details: { url: input.url, events }
              })
              return { ...toInfo(row!), signing_secret: secret }
            })
          )
          .pipe(Effect.catchTag(["SqlError", "SchemaError"], Effect.die))
      })

      const remove = Effect.fn("Webhooks.remove")(function* (owner: Owner, id: string) {
        yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const rows = yield* sql<{ readonly url: string }>`
                DELETE FROM webhooks WHERE account_id = ${owner.accountId} AND id = ${id} RETURNING url`
              if (rows.length === 0) return yield* new WebhookNotFound()
              yield* audit.record(owner, {
                action: "webhook.deleted",
                targetType: "webhook",
                targetId: id,
                details: { url: rows[0]!.url }
              })
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))
      })

      const rotateSecret = Effect.fn("Webhooks.rotateSecret")(function* (owner: Owner, id: string) {
        const secret = Signing.newSecret()
        const at = yield* now
        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const [row] = yield* sql`
                UPDATE webhooks SET previous_secret_ciphertext = secret_ciphertext,
                  previous_secret_until = ${new Date(at.getTime() + ROTATION_GRACE_MS)},
                  secret_ciphertext = ${Signing.encrypt(key, secret)}, secret_preview = ${Signing.preview(secret)},
                  updated_at = ${at}
                WHERE account_id = ${owner.accountId} AND id = ${id}
                RETURNING *`.pipe(decodeWebhooks)
              if (row === undefined) return yield* new WebhookNotFound()
              yield* audit.record(owner, {
                action: "webhook.secret_rotated",
                targetType: "webhook",
                targetId: id,
                details: {}
              })
              return { ...toInfo(row), signing_secret: secret }
            })
          )
          .pipe(Effect.catchTag(["SqlError", "SchemaError"], Effect.die))
      })

      const deliveries = Effect.fn("Webhooks.deliveries")(function* (owner: Owner, query: DeliveryQuery) {
        const limit = query.limit ?? 20
        const after =
          query.cursor === undefined
            ? undefined
            : yield* Schema.decodeUnknownEffect(Cursor)(query.cursor).pipe(
                Effect.mapError(() => new InvalidField({ field: "cursor" }))
              )
        const filters = [
          sql`account_id = ${owner.accountId}`,
          ...(query.webhook_id === undefined ? [] : [sql`webhook_id = ${query.webhook_id}`]),
          ...(query.event_type === undefined ? [] : [sql`event_type = ${query.event_type}`]),
          ...(query.state === undefined ? [] : [sql`state = ${query.state}`]),
          ...(after === undefined ? [] : [sql`(created_at, id) < (${after[0]}, ${after[1]})`])
        ]
        const rows = yield* sql`
          SELECT * FROM webhook_deliveries WHERE ${sql.and(filters)}
          ORDER BY created_at DESC, id DESC LIMIT ${limit + 1}`.pipe(
          decodeDeliveries,
          Effect.catchTag(["SqlError", "SchemaError"], Effect.die)
        )
        const page = rows.slice(0, limit)
        const last = page[page.length - 1]
        return {
          data: page.map(toDelivery),
          nextCursor:
            rows.length > limit && last !== undefined
              ? Schema.encodeSync(Cursor)([last.created_at, last.id] as const)
              : null
        }
      })

      const findDelivery = (owner: Owner, id: string) =>
        sql`SELECT * FROM webhook_deliveries WHERE account_id = ${owner.accountId} AND id = ${id}`.pipe(
          decodeDeliveries,
          Effect.catchTag(["SqlError", "SchemaError"], Effect.die),
          Effect.flatMap((rows) =>
            rows[0] === undefined ? Effect.fail(new DeliveryNotFound()) : Effect.succeed(rows[0])
          )
        )

      const delivery = Effect.fn("Webhooks.delivery")(function* (owner: Owner, id: string) {
        const row = yield* findDelivery(owner, id)
        const [event] = yield* sql<{
          id: string
          type: string
          created_at: Date
          account_id: string
          data: unknown
        }>`
          SELECT id, type, created_at, account_id, data FROM webhook_events WHERE id = ${row.event_id}`.pipe(
          Effect.orDie
        )
        const attempts = yield* sql`
          SELECT series, number, started_at, finished_at, duration_ms, status_code, error, response_excerpt
          FROM webhook_attempts WHERE delivery_id = ${id} ORDER BY series, number`.pipe(
          Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(AttemptRow))),
          Effect.catchTag(["SqlError", "SchemaError"], Effect.die)
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
          .pipe(Effect.catchTag(["SqlError", "SchemaError"], Effect.die))

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
      }).pipe(Effect.orDie)

      return Webhooks.of({ list, create, remove, rotateSecret, deliveries, delivery, replay, discard, purge })
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
    const webhooks = yield* Webhooks
    yield* webhooks.purge.pipe(
      Effect.tap((n) => (n > 0 ? Effect.logInfo("webhook.purged", { deliveries: n }) : Effect.void)),
      Effect.catchCause((cause) => Effect.logWarning("webhook.purge_failed", { cause })),
      Effect.andThen(Effect.sleep("1 hour")),
      Effect.forever,
      Effect.forkScoped
    )
  })
)
