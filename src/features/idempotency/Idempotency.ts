import * as Housekeeping from "../../platform/work/Housekeeping.ts"
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { Singleton } from "effect/cluster"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { IdempotencyConflict } from "../../kernel/Errors.ts"
import * as Sql from "../../platform/db/Sql.ts"

/** How long a key's first response is kept and replayed. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000

/** Another request with the same key committed first: the caller replays its response. */
export class IdempotencyRace extends Schema.TaggedError<IdempotencyRace>()("IdempotencyRace", {}) {}

export interface IdempotencyScope {
  readonly accountId: string
  /** `POST /v1/sessions`: keys are per account and route. */
  readonly route: string
  readonly key: string
  /** The request as the route understood it; equal requests have equal hashes. */
  readonly request: unknown
}

/** JSON with object keys sorted, so `{a,b}` and `{b,a}` hash alike. */
const canonical = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonical).join(",")}]`
    : value !== null && typeof value === "object"
      ? `{${Object.keys(value)
          .sort()
          .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
          .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
          .join(",")}}`
      : JSON.stringify(value)

export const requestHash = (request: unknown) =>
  Crypto.createHash("sha256").update(canonical(request)).digest()

const Stored = Schema.Struct({
  request_hash: Schema.Uint8Array,
  response_status: Schema.Number,
  response_body: Schema.Unknown
})

/**
 * Idempotency-Key for mutating routes, with Stripe's semantics: within 24
 * hours the same key and request get the first response again; the same key
 * with another request is 409 `idempotency_conflict`. The record is written in
 * the transaction that does the work, so a retry after a timeout either finds
 * it or finds nothing was done, never half of it. Refusals (4xx) are not
 * recorded: a retry after a top-up may succeed.
 */
export class Idempotency extends Context.Service<
  Idempotency,
  {
    /** The response recorded for this key, if any (`IdempotencyConflict` when the request differs). */
    readonly replay: (
      scope: IdempotencyScope
    ) => Effect.Effect<
      Option.Option<{ readonly status: number; readonly body: unknown }>,
      IdempotencyConflict
    >
    /**
     * Records the response; run it inside the transaction that does the work.
     * Fails with `IdempotencyRace` when a concurrent request with the key won.
     */
    readonly record: (
      scope: IdempotencyScope,
      response: { readonly status: number; readonly body: unknown }
    ) => Effect.Effect<void, IdempotencyRace>
    /** Forgets keys older than the window. */
    readonly purge: Effect.Effect<number>
  }
>()("rbs/idempotency/Idempotency") {
  static readonly layer = Layer.effect(
    Idempotency,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const windowStart = Effect.map(Clock.currentTimeMillis, (now) => new Date(now - IDEMPOTENCY_WINDOW_MS))

      const replay = Effect.fn("Idempotency.replay")(function* (scope: IdempotencyScope) {
        const since = yield* windowStart
        const rows = yield* sql`
          SELECT request_hash, response_status, response_body FROM idempotency_keys
          WHERE account_id = ${scope.accountId} AND route = ${scope.route} AND key = ${scope.key}
            AND created_at > ${since}`.pipe(
          Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(Stored))),
          Sql.orDefect
        )
        const stored = rows[0]
        if (stored === undefined) return Option.none()
        if (!Buffer.from(stored.request_hash).equals(requestHash(scope.request))) {
          return yield* new IdempotencyConflict()
        }
        return Option.some({ status: stored.response_status, body: stored.response_body })
      })

      const record = Effect.fn("Idempotency.record")(function* (
        scope: IdempotencyScope,
        response: { readonly status: number; readonly body: unknown }
      ) {
        const now = new Date(yield* Clock.currentTimeMillis)
        const since = yield* windowStart
        // An expired record of the key is replaced; a live one (or a concurrent insert) wins.
        const inserted = yield* sql`
          INSERT INTO idempotency_keys (account_id, route, key, request_hash, response_status, response_body, created_at)
          VALUES (${scope.accountId}, ${scope.route}, ${scope.key}, ${requestHash(scope.request)}, ${response.status},
            ${JSON.stringify(response.body)}::jsonb, ${now})
          ON CONFLICT (account_id, route, key) DO UPDATE SET
            request_hash = excluded.request_hash, response_status = excluded.response_status,
            response_body = excluded.response_body, created_at = excluded.created_at
          WHERE idempotency_keys.created_at <= ${since}
          RETURNING key`.pipe(Sql.orDefect)
        if (inserted.length === 0) return yield* new IdempotencyRace()
      })

      const purge = Effect.gen(function* () {
        const since = yield* windowStart
        const rows = yield* sql`DELETE FROM idempotency_keys WHERE created_at <= ${since} RETURNING key`.pipe(
          Sql.orDefect
        )
        return rows.length
      })

      return Idempotency.of({ replay, record, purge })
    })
  )
}

/** Once across all nodes, every hour: forget keys past the window. */
export const layerPurge = Singleton.make(
  "rbs/idempotency/Purge",
  Effect.gen(function* () {
    const idempotency = yield* Idempotency
    return yield* Housekeeping.every(
      {
        name: "idempotency",
        interval: "1 hour",
        removed: (count) => ({ count }),
        level: "Debug",
        failure: "Error"
      },
      idempotency.purge
    )
  })
)
