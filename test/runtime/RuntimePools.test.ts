import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import { NodeCapacity } from "../../src/platform/cluster/NodeCapacity.ts"
import { RuntimePools } from "../../src/runtime/RuntimePools.ts"
import { availabilityOf, type RuntimePool, unavailable } from "../../src/runtime/SessionRuntime.ts"

/** A pool with `capacity` places that launches nothing (its kind's own checks passed). */
const placesOnly = (kind: string, capacity: number): RuntimePool => ({
  ...unavailable(kind, "unused"),
  availability: undefined,
  capacity
})

describe("runtime pools", () => {
  it.effect(
    "log one line at start per kind the node does not run, with why, and tell placement the same reason",
    () =>
      Effect.gen(function* () {
        const lines: Array<readonly [string, unknown]> = []
        const collector = Logger.make((options) => lines.push([options.logLevel, options.message]))
        const why = "MAX_SANDBOXES is 0: set it above 0, or unset it, to run sandboxes"
        const pools = [
          Effect.succeed(placesOnly("browser", 2)),
          Effect.succeed(unavailable("sandbox", why)),
          Effect.succeed(placesOnly("echo", 0))
        ]
        const capacity = yield* Effect.provide(
          Effect.service(NodeCapacity),
          RuntimePools.nodeCapacity.pipe(
            Layer.provideMerge(RuntimePools.layer(pools)),
            Layer.provide(Logger.layer([collector]))
          )
        )
        assert.deepStrictEqual(lines, [
          ["Warn", ["sandbox.unavailable", { kind: "sandbox", reason: why }]],
          [
            "Warn",
            ["echo.unavailable", { kind: "echo", reason: "this node has no places for echo sessions" }]
          ]
        ])
        assert.isUndefined(capacity.reasonOf("browser"))
        assert.strictEqual(capacity.reasonOf("sandbox"), why)
        assert.strictEqual(capacity.reasonOf("gone"), "this service has no gone runtime")
        assert.deepStrictEqual(
          [capacity.of("browser"), capacity.of("sandbox")],
          [2, 0],
          "an unavailable kind has no places"
        )
        assert.deepStrictEqual(availabilityOf(placesOnly("browser", 1)), { available: true })
      })
  )
})
