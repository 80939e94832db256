import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { RateLimitReport } from "../../../src/features/limits/RateLimitReport.ts"
import { LimitsConfig } from "../../../src/features/limits/LimitsConfig.ts"
import { RateLimits } from "../../../src/features/limits/RateLimits.ts"
import * as RedisServer from "../../support/RedisServer.ts"

/** One node's limits, on the shared Redis. */
const node = (redisUrl: string) =>
  RateLimits.layer.pipe(
    Layer.provide(
      LimitsConfig.layer.pipe(
        Layer.provideMerge(
          ServiceConfig.layer({ redisUrl, limits: { sessionCreatesPerMinute: 5 }, logLevel: "Error" })
        )
      )
    )
  )

const consumeOn = (layer: Layer.Layer<RateLimits>, key: string) =>
  Effect.gen(function* () {
    const limits = yield* RateLimits
    const cell = { current: undefined as any }
    const outcome = yield* limits
      .consume("session_create", key)
      .pipe(Effect.provideService(RateLimitReport, cell), Effect.result)
    return { outcome, state: cell.current }
  }).pipe(Effect.provide(layer))

describe("rate limits in Redis (REDIS_URL)", () => {
  it.live("two nodes share one budget per account", () =>
    Effect.gen(function* () {
      const url = yield* RedisServer.serve
      const a = node(url)
      const b = node(url)
      const remaining: Array<number> = []
      for (const layer of [a, b, a, b, a]) {
        const { outcome, state } = yield* consumeOn(layer, "account-1")
        assert.strictEqual(outcome._tag, "Success")
        remaining.push(state.remaining)
      }
      assert.deepStrictEqual(remaining, [4, 3, 2, 1, 0])
      for (const layer of [a, b]) {
        const { outcome, state } = yield* consumeOn(layer, "account-1")
        assert.strictEqual(outcome._tag, "Failure", "the sixth in a minute is refused on every node")
        if (outcome._tag === "Failure") assert.strictEqual(outcome.failure.code, "rate_limited")
        assert.isAtLeast(state.retryAfterSeconds, 1)
      }
      const other = yield* consumeOn(b, "account-2")
      assert.strictEqual(other.outcome._tag, "Success", "another account has its own budget")
    }).pipe(Effect.scoped)
  )
})
