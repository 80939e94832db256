import { Clock, Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { ConcurrencyLimitReached } from "../../kernel/Errors.ts"
import { countRejection } from "./LimitMetrics.ts"
import { RateLimitReport } from "./RateLimitReport.ts"
import { LimitsConfig } from "./LimitsConfig.ts"

/** How long a client refused for concurrency should wait before trying again. */
export const CONCURRENCY_RETRY_AFTER_SECONDS = 5

/**
 * Open sessions per account (`creating` or `ready`), capped race-free: the
 * account's row is locked first (the admission's balance gate takes the lock,
 * see `BalanceGate`), so concurrent creates of one account take turns on every
 * node sharing the database, and the count, read by a statement after the
 * lock was granted, stays true until the new row is in. Must run inside the
 * transaction that inserts, after that lock.
 */
export class ConcurrencySlots extends Context.Service<
  ConcurrencySlots,
  {
    readonly reserve: (accountId: string) => Effect.Effect<void, ConcurrencyLimitReached>
  }
>()("rbs/limits/ConcurrencySlots") {
  static readonly layer = Layer.effect(
    ConcurrencySlots,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const limit = (yield* LimitsConfig).concurrentSessions

      const reserve = Effect.fnUntraced(
        function* (accountId: string) {
          const [open] = yield* sql<{ readonly count: string; readonly next_expiry: Date | null }>`
          SELECT count(*)::text AS count, min(expires_at) AS next_expiry FROM sessions
          WHERE account_id = ${accountId} AND status IN ('creating', 'ready')`
          const count = Number(open?.count ?? 0)
          if (count < limit) return
          const now = yield* Clock.currentTimeMillis
          const report = yield* RateLimitReport
          report.current = {
            limit,
            remaining: 0,
            // A slot is certain to free up when the soonest open session expires.
            resetSeconds:
              open?.next_expiry == null ? 0 : Math.max(0, (open.next_expiry.getTime() - now) / 1000),
            scope: "account",
            retryAfterSeconds: CONCURRENCY_RETRY_AFTER_SECONDS
          }
          yield* countRejection("concurrency")
          return yield* new ConcurrencyLimitReached()
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      return ConcurrencySlots.of({ reserve })
    })
  )
}
