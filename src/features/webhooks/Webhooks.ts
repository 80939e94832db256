import { Clock, Context, Effect, Layer, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import { Secrets } from "../../platform/crypto/Secrets.ts"
import { InvalidField, type ResourceLimitReached } from "../../kernel/Errors.ts"
import type { Owner } from "../../kernel/Owner.ts"
import {
  type CreateWebhookRequest,
  type CustomerWebhookInfo,
  WEBHOOK_EVENTS,
  WebhookNotFound,
  type WebhookWithSecret
} from "../../kernel/Webhook.ts"
import { AccountBounds } from "../limits/AccountBounds.ts"
import { Egress } from "../../platform/net/Egress.ts"
import * as Sealed from "../../platform/crypto/Sealed.ts"
import * as Signing from "./Signing.ts"
import { describeProblem, resolveTarget } from "./Targets.ts"
import * as Sql from "../../platform/db/Sql.ts"

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

/** The webhooks of an account: `/v1/webhooks` (their deliveries are `WebhookDeliveries`). */
export class Webhooks extends Context.Service<
  Webhooks,
  {
    readonly list: (owner: Owner) => Effect.Effect<ReadonlyArray<CustomerWebhookInfo>>
    readonly create: (
      owner: Owner,
      input: CreateWebhookRequest
    ) => Effect.Effect<WebhookWithSecret, InvalidField | ResourceLimitReached>
    readonly remove: (owner: Owner, id: string) => Effect.Effect<void, WebhookNotFound>
    /** A new secret, shown once; the old one keeps signing beside it for 24 hours. */
    readonly rotateSecret: (owner: Owner, id: string) => Effect.Effect<WebhookWithSecret, WebhookNotFound>
  }
>()("rbs/webhooks/Webhooks") {
  static readonly layer = Layer.effect(
    Webhooks,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* Audit
      const egress = yield* Egress
      const bounds = yield* AccountBounds
      const key = Redacted.value((yield* Secrets).secretsAtRestKey)
      const guard = { policy: egress.webhookPolicy, allowed: egress.webhookAllowed }
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const list = (owner: Owner) =>
        sql`SELECT * FROM webhooks WHERE account_id = ${owner.accountId} ORDER BY created_at, id`.pipe(
          decodeWebhooks,
          Effect.map((rows) => rows.map(toInfo)),
          Sql.orDefect
        )

      const countOf = (accountId: string) =>
        sql<{
          readonly n: number
        }>`SELECT count(*)::int AS n FROM webhooks WHERE account_id = ${accountId}`.pipe(
          Effect.map((rows) => rows[0]?.n ?? 0),
          Sql.orDefect
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
              yield* bounds.reserve("webhooks", owner.accountId, countOf(owner.accountId))
              const [row] = yield* sql`
                INSERT INTO webhooks (id, account_id, url, events, description, secret_ciphertext, secret_preview, created_at, updated_at)
                VALUES (${id}, ${owner.accountId}, ${input.url}, ${events}::text[], ${description},
                  ${Sealed.encrypt(key, secret)}, ${Signing.preview(secret)}, ${at}, ${at})
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
          .pipe(Sql.orDefect)
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
          .pipe(Sql.orDefect)
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
                  secret_ciphertext = ${Sealed.encrypt(key, secret)}, secret_preview = ${Signing.preview(secret)},
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
          .pipe(Sql.orDefect)
      })

      return Webhooks.of({ list, create, remove, rotateSecret })
    })
  )
}
