import { Clock, Context, Effect, Layer } from "effect"
import { ConcurrencyLimitReached } from "../../kernel/Errors.ts"
import { countRejection } from "./LimitMetrics.ts"
import { RateLimitReport } from "./RateLimitReport.ts"
import { LimitsConfig } from "./LimitsConfig.ts"

/** How long a client refused for concurrency should wait before trying again. */
export const CONCURRENCY_RETRY_AFTER_SECONDS = 5

/**
 * An account's open sessions (`creating` or `ready`) as the cap counts them:
 * how many, and when the soonest expires. The sessions feature implements
 * it, the composition root wires it.
 */
export class OpenSessions extends Context.Service<
  OpenSessions,
  {
    readonly ofAccount: (
      accountId: string
    ) => Effect.Effect<{ readonly count: number; readonly nextExpiry: Date | null }>
  }
>()("rbs/limits/OpenSessions") {}

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
      const sessions = yield* OpenSessions
      const limit = (yield* LimitsConfig).concurrentSessions

      const reserve = Effect.fnUntraced(function* (accountId: string) {
        const open = yield* sessions.ofAccount(accountId)
        if (open.count < limit) return
        const now = yield* Clock.currentTimeMillis
        const report = yield* RateLimitReport
        report.current = {
          limit,
          remaining: 0,
          // A slot is certain to free up when the soonest open session expires.
          resetSeconds: open.nextExpiry === null ? 0 : Math.max(0, (open.nextExpiry.getTime() - now) / 1000),
          scope: "account",
          retryAfterSeconds: CONCURRENCY_RETRY_AFTER_SECONDS
        }
        yield* countRejection("concurrency")
        return yield* new ConcurrencyLimitReached()
      })

      return ConcurrencySlots.of({ reserve })
    })
  )
}
