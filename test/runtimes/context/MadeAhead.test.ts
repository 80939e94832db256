import { assert, describe, it } from "@effect/vitest"
import * as MadeAhead from "../../../src/runtimes/context/MadeAhead.ts"

describe("MadeAhead", () => {
  it("wants as many as asked within one context's making, at least one, at most the maximum", () => {
    const now = 100_000
    assert.strictEqual(MadeAhead.wanted([], now, 50, 4), 1, "no ask: one a browser, as always")
    // One after the other, each further apart than a making: one is enough.
    assert.strictEqual(MadeAhead.wanted([now - 400, now - 200, now], now, 50, 4), 1)
    // Three within 50 ms, then one alone.
    assert.strictEqual(MadeAhead.wanted([now - 1000, now - 980, now - 960, now - 500], now, 50, 4), 3)
    // Six at once: the maximum.
    assert.strictEqual(
      MadeAhead.wanted(
        [1, 2, 3, 4, 5, 6].map((i) => now - i),
        now,
        50,
        4
      ),
      4
    )
    // A making faster than the floor still counts asks that close as together.
    assert.strictEqual(MadeAhead.wanted([now - 15, now], now, 1, 4), 2)
  })

  it("forgets asks older than the window: the demand decays to one", () => {
    const burst = [0, 5, 10, 15]
    assert.strictEqual(MadeAhead.wanted(burst, 1_000, 50, 8), 4)
    assert.strictEqual(MadeAhead.wanted(burst, 15 + MadeAhead.DEMAND_WINDOW_MS, 50, 8), 1)
    assert.deepStrictEqual(MadeAhead.recent(burst, 10 + MadeAhead.DEMAND_WINDOW_MS), [10, 15])
    assert.deepStrictEqual(MadeAhead.record([30, 10], 20), [10, 20, 30], "kept in order")
  })

  it("a making's time moves the mean by a quarter of the difference", () => {
    assert.strictEqual(MadeAhead.smooth(50, 90), 60)
    assert.strictEqual(MadeAhead.smooth(60, 60), 60)
  })
})
