import { Clock, Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type * as Statement from "effect/sql/Statement"
import * as Crypto from "node:crypto"
import type { WebhookEventData, WebhookEventType } from "../../kernel/Webhook.ts"
import * as Sql from "../../platform/db/Sql.ts"

/** The channel a commit that made deliveries notifies: every node's deliverer wakes on it. */
export const WAKE_CHANNEL = "rbs_webhooks"

/**
 * The webhook outbox. `emit` writes the event and one delivery for each of
 * the account's enabled webhooks subscribed to its type, on the caller's
 * connection: called inside the transaction of the change it describes, the
 * event exists exactly when the change does (none lost, none invented). The
 * commit wakes the deliverers (`NOTIFY`, sent by Postgres only on commit).
 */
export class WebhookOutbox extends Context.Service<
  WebhookOutbox,
  {
    /** `data` has the shape OpenAPI documents for the type (`WEBHOOK_EVENT_DATA`). */
    readonly emit: <T extends WebhookEventType>(
      accountId: string,
      type: T,
      data: WebhookEventData<T>
    ) => Effect.Effect<void>
    /**
     * `emit` as a part of the statement that makes the change (a `WITH` list's CTEs, all named
     * `<name>_...`): the event of the one row of the CTE `source`, if it has one, for the account
     * in its `account_id`; `data` is a `jsonb` expression over that row, named `source`. The
     * change and its event then take one round trip.
     */
    readonly emitPart: (
      name: string,
      source: string,
      type: WebhookEventType,
      data: Statement.Fragment
    ) => Effect.Effect<Statement.Fragment>
  }
>()("rbs/webhooks/WebhookOutbox") {
  static readonly layer = Layer.effect(
    WebhookOutbox,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const emit = <T extends WebhookEventType>(accountId: string, type: T, data: WebhookEventData<T>) =>
        Effect.gen(function* () {
          const at = new Date(yield* Clock.currentTimeMillis)
          const id = `evt_${Crypto.randomUUID()}`
          // One statement: the subscribed webhooks, the event (only when there is one: events
          // nobody subscribed to are not kept, no row without a delivery), a delivery to each,
          // and the wake-up. The deliveries' reference to the event is checked at its end.
          yield* sql`
            WITH subscribed AS (
              SELECT w.id FROM webhooks w
              WHERE w.account_id = ${accountId} AND w.disabled_at IS NULL AND ${type} = ANY (w.events)
            ), event AS (
              INSERT INTO webhook_events (id, account_id, type, data, created_at)
              SELECT ${id}, ${accountId}, ${type}, ${JSON.stringify(data)}::jsonb, ${at}
              WHERE EXISTS (SELECT 1 FROM subscribed)
              RETURNING id
            ), deliveries AS (
              INSERT INTO webhook_deliveries
                (id, webhook_id, event_id, account_id, event_type, state, next_attempt_at, created_at, updated_at)
              SELECT 'whd_' || gen_random_uuid(), s.id, e.id, ${accountId}, ${type}, 'pending', ${at}, ${at}, ${at}
              FROM subscribed s CROSS JOIN event e
            )
            SELECT pg_notify(${WAKE_CHANNEL}, '') FROM event`
        }).pipe(Sql.orDefect, Effect.withSpan("WebhookOutbox.emit", { attributes: { type } }))
      const emitPart = (name: string, source: string, type: WebhookEventType, data: Statement.Fragment) =>
        Effect.map(Clock.currentTimeMillis, (millis) => {
          const at = new Date(millis)
          const [subscribed, event] = [sql(`${name}_subscribed`), sql(`${name}_event`)]
          // As `emit`'s statement; the wake-up is the event's own (a CTE's SELECT would not run unread).
          return sql`
            ${subscribed} AS (
              SELECT w.id FROM webhooks w JOIN ${sql(source)} source ON w.account_id = source.account_id
              WHERE w.disabled_at IS NULL AND ${type}::text = ANY (w.events)
            ), ${event} AS (
              INSERT INTO webhook_events (id, account_id, type, data, created_at)
              SELECT ${`evt_${Crypto.randomUUID()}`}::text, source.account_id, ${type}::text, ${data}, ${at}::timestamptz
              FROM ${sql(source)} source
              WHERE EXISTS (SELECT 1 FROM ${subscribed})
              RETURNING id, account_id, pg_notify(${WAKE_CHANNEL}::text, '')
            ), ${sql(`${name}_deliveries`)} AS (
              INSERT INTO webhook_deliveries
                (id, webhook_id, event_id, account_id, event_type, state, next_attempt_at, created_at, updated_at)
              SELECT 'whd_' || gen_random_uuid(), s.id, e.id, e.account_id, ${type}::text, 'pending',
                ${at}::timestamptz, ${at}::timestamptz, ${at}::timestamptz
              FROM ${subscribed} s CROSS JOIN ${event} e
            )`
        })
      return WebhookOutbox.of({ emit, emitPart })
    })
  )

  /** No webhooks (a host that does not deliver any): events are dropped. */
  static readonly layerNone = Layer.effect(
    WebhookOutbox,
    Effect.map(SqlClient.SqlClient, (sql) =>
      WebhookOutbox.of({
        emit: () => Effect.void,
        // Nothing to write: a CTE that selects nothing, unread.
        emitPart: (name) => Effect.succeed(sql`${sql(`${name}_none`)} AS (SELECT 1)`)
      })
    )
  )
}
