import { assert, describe, it } from "@effect/vitest"
import * as MadeAhead from "../../../src/runtimes/context/MadeAhead.ts"

const WINDOW = MadeAhead.DEFAULT_WINDOW_MS
const wanted = (asks: ReadonlyArray<MadeAhead.Ask>, now: number, max: number) =>
  MadeAhead.wanted(asks, now, max, WINDOW)

/** The asks recorded at `times`, each with the making time `togetherMs` of its moment. */
const asked = (times: ReadonlyArray<number>, togetherMs: number) =>
  times.reduce<Array<MadeAhead.Ask>>((asks, at) => MadeAhead.record(asks, at, togetherMs, WINDOW), [])

describe("MadeAhead", () => {
  it("wants as many as asked within one context's making, at least one, at most the maximum", () => {
    const now = 100_000
    assert.strictEqual(wanted([], now, 4), 1, "no ask: one a browser, as always")
    // One after the other, each further apart than a making: one is enough.
    assert.strictEqual(wanted(asked([now - 400, now - 200, now], 50), now, 4), 1)
    // Three within 50 ms, then one alone.
    assert.strictEqual(wanted(asked([now - 1000, now - 980, now - 960, now - 500], 50), now, 4), 3)
    // Six at once: the maximum.
    assert.strictEqual(
      wanted(
        asked(
          [6, 5, 4, 3, 2, 1].map((i) => now - i),
          50
        ),
        now,
        4
      ),
      4
    )
    // A making faster than the floor still counts asks that close as together.
    assert.strictEqual(wanted(asked([now - 15, now], 1), now, 4), 2)
  })

  it("a burst is counted when it comes: a making later faster does not shrink it", () => {
    const burst = asked([1000, 1030, 1060], 80)
    assert.strictEqual(wanted(burst, 2000, 8), 3)
    // The next ask comes when making takes 10 ms: it is alone, the burst stays what it was.
    const later = MadeAhead.record(burst, 1500, 10, WINDOW)
    assert.strictEqual(wanted(later, 2000, 8), 3)
  })

  it("forgets asks older than the window: the demand decays to one", () => {
    const burst = asked([0, 5, 10, 15], 50)
    assert.strictEqual(wanted(burst, 1_000, 8), 4)
    assert.strictEqual(wanted(burst, 16 + WINDOW, 8), 1)
    assert.deepStrictEqual(
      MadeAhead.recent(burst, 10 + WINDOW, WINDOW).map((ask) => ask.at),
      [10, 15]
    )
  })

  it("a making's time moves the mean by a quarter of the difference", () => {
    assert.strictEqual(MadeAhead.smooth(50, 90), 60)
    assert.strictEqual(MadeAhead.smooth(60, 60), 60)
  })
})
