import { Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { RateLimiter } from "effect/persistence"
import { RedisConfig } from "../../platform/config/Config.ts"
import { RateLimited } from "../../kernel/Errors.ts"
import { countRejection } from "./LimitMetrics.ts"
import { RateLimitReport, type RateLimitState } from "./RateLimitReport.ts"
import { LimitsConfig } from "./LimitsConfig.ts"

/** The rate limits of the interface; their budgets come from `LimitsConfig`. */
export type RateLimitName =
  | "session_create"
  | "screenshot"
  | "computer"
  | "preview_token"
  | "webhook_write"
  | "job_write"
  | "workspace_write"
  | "login_email"
  | "login_ip"
  | "login_account"
  | "register_ip"
  | "register_all"
  | "exec"
  | "file_transfer"
  | "mcp"
  | "assistant_write"

const WINDOW = Duration.minutes(1)

/**
 * The service's rate limits over `effect/persistence`'s RateLimiter: each
 * consume records its verdict in the request's `RateLimitReport` (for the
 * headers) and refuses with `RateLimited` once the budget is spent.
 */
export class RateLimits extends Context.Service<
  RateLimits,
  {
    /** Takes one from `name`'s budget for `key` (an account, or a session of one). */
    readonly consume: (name: RateLimitName, key: string) => Effect.Effect<void, RateLimited>
    /** Records the budget's state for the headers without spending any (answers that cost nothing). */
    readonly peek: (name: RateLimitName, key: string) => Effect.Effect<void>
    /**
     * Refuses a request that found a bounded resource of the service full (`what`, with `capacity`
     * places): 429 `rate_limited`, `Retry-After` in `retryAfterSeconds`, scope `service`.
     */
    readonly refuseBusy: (
      what: string,
      capacity: number,
      retryAfterSeconds: number
    ) => Effect.Effect<never, RateLimited>
  }
>()("rbs/limits/RateLimits") {
  static readonly layerNoDeps = Layer.effect(
    RateLimits,
    Effect.gen(function* () {
      const limits = yield* LimitsConfig
      const limiter = yield* RateLimiter.RateLimiter
      const budgets: Record<RateLimitName, number> = {
        session_create: limits.sessionCreatesPerMinute,
        screenshot: limits.screenshotsPerMinute,
        computer: limits.computerCallsPerMinute,
        preview_token: limits.previewTokensPerMinute,
        webhook_write: limits.webhookMutationsPerMinute,
        job_write: limits.jobMutationsPerMinute,
        workspace_write: limits.workspaceMutationsPerMinute,
        login_email: limits.loginAttemptsPerEmail,
        login_ip: limits.loginAttemptsPerIp,
        login_account: limits.loginAttemptsPerAccount,
        register_ip: limits.registrationsPerIp,
        register_all: limits.registrationsPerMinute,
        exec: limits.execPerMinute,
        file_transfer: limits.fileTransfersPerMinute,
        mcp: limits.mcpRequestsPerMinute,
        assistant_write: limits.assistantMutationsPerMinute
      }
      // Login and sign-up limits count attempts at a would-be principal (all sign-ups together the
      // service's), exec and files a principal's use; the others an account's.
      const scopeOf = (name: RateLimitName) =>
        name === "register_all"
          ? "service"
          : name.startsWith("login_") ||
              name === "register_ip" ||
              name === "exec" ||
              name === "file_transfer" ||
              name === "mcp"
            ? "principal"
            : "account"

      const consume = Effect.fnUntraced(function* (name: RateLimitName, key: string, tokens = 1) {
        const limit = budgets[name]
        const report = yield* RateLimitReport
        const result = yield* limiter
          .consume({
            key: `${name}:${key}`,
            algorithm: "fixed-window",
            limit,
            window: WINDOW,
            onExceeded: "fail",
            tokens
          })
          .pipe(Effect.result)
        if (result._tag === "Success") {
          // A request that spends several budgets reports the one with the least left.
          const previous = report.current
          if (previous === undefined || result.success.remaining < previous.remaining)
            report.current = {
              limit,
              remaining: result.success.remaining,
              resetSeconds: Duration.toSeconds(result.success.resetAfter),
              scope: scopeOf(name)
            } satisfies RateLimitState
          return
        }
        const reason = result.failure.reason
        if (reason._tag === "RateLimitStoreError") {
          // The store (Redis) is down: serve rather than refuse everyone, and say so.
          yield* Effect.logError("limits.store_failed", { limit: name, error: reason.message })
          return
        }
        const retryAfterSeconds = Math.max(1, Math.ceil(Duration.toSeconds(reason.retryAfter)))
        report.current = {
          limit,
          remaining: 0,
          resetSeconds: retryAfterSeconds,
          scope: scopeOf(name),
          retryAfterSeconds
        }
        yield* countRejection(name)
        return yield* new RateLimited({ limit: name, retryAfterSeconds })
      })

      return RateLimits.of({
        consume: (name, key) => consume(name, key),
        // Zero tokens: the store answers the budget as it stands and spends nothing.
        peek: (name, key) => consume(name, key, 0).pipe(Effect.ignore),
        refuseBusy: (what, capacity, retryAfterSeconds) =>
          Effect.gen(function* () {
            const report = yield* RateLimitReport
            report.current = {
              limit: capacity,
              remaining: 0,
              resetSeconds: retryAfterSeconds,
              scope: "service",
              retryAfterSeconds
            }
            return yield* new RateLimited({ limit: what, retryAfterSeconds })
          })
      })
    })
  )

  /**
   * The limiter's store: in memory on one node, Redis (`REDIS_URL`) when nodes share limits. The
   * Redis client is loaded only then: a node without it starts without its modules.
   */
  static readonly layerStore = Layer.unwrap(
    RedisConfig.use((config) =>
      Option.match(config.redisUrl, {
        onNone: () => Effect.succeed(RateLimiter.layerStoreMemory),
        onSome: (url) =>
          Effect.map(
            Effect.promise(() => import("@effect/platform-node/NodeRedis")),
            (NodeRedis) =>
              RateLimiter.layerStoreRedis({ prefix: "rbs:ratelimit:" }).pipe(
                Layer.provide(NodeRedis.layer({ url: Redacted.value(url) })),
                Layer.orDie
              )
          )
      })
    )
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide(RateLimiter.layer),
    Layer.provide(RateLimits.layerStore)
  )
}
