import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { request, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

/** The signup credits a service's `/metrics` shows, in micro-USD (0 when none). */
const signupCredits = (baseUrl: string) =>
  Effect.map(request(baseUrl, "GET", "/metrics", {}), (metrics) => {
    const line = metrics.text
      .split("\n")
      .find(
        (line) => line.startsWith("rbs_ledger_credits_micro_usd_total{") && line.includes("signup_credit")
      )
    return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))
  })

describe("metrics", () => {
  it.live(
    "two services in one process each show their own at /metrics, not the other's",
    () =>
      Effect.gen(function* () {
        const start = (credit: number) =>
          Effect.map(
            Layer.build(TestService.layer({ browserPoolSize: 0, signupCreditUsd: credit })),
            (context) => Context.get(context, TestService.TestService).baseUrl
          )
        const a = yield* start(5)
        const b = yield* start(2)
        yield* signUp(a)
        yield* signUp(a)
        yield* signUp(b)
        assert.strictEqual(yield* signupCredits(a), 10_000_000)
        assert.strictEqual(yield* signupCredits(b), 2_000_000)
      }).pipe(Effect.scoped),
    120_000
  )
})
