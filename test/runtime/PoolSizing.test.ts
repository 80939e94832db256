import { assert, describe, it } from "@effect/vitest"
import {
  defaultCapacity,
  demandRate,
  launchEstimate,
  pruneArrivals,
  recordLaunch,
  rateIn,
  warmTarget
} from "../../src/runtime/PoolSizing.ts"

const GiB = 2 ** 30

describe("pool sizing", () => {
  it("keeps BROWSER_POOL_SIZE warm when demand is low", () => {
    assert.strictEqual(warmTarget({ rate: 0, launchSeconds: 0.5, floor: 2, capacity: 10, busy: 0 }), 2)
    assert.strictEqual(warmTarget({ rate: 0.2, launchSeconds: 0.5, floor: 2, capacity: 10, busy: 3 }), 2)
  })

  it("keeps what arrives during a launch, twice over, when demand is high", () => {
    // 2 creates a second, 1.5 s launches: 3 arrive per launch, 6 kept warm.
    assert.strictEqual(warmTarget({ rate: 2, launchSeconds: 1.5, floor: 2, capacity: 20, busy: 0 }), 6)
    // Slower launches under load mean more warm browsers for the same rate.
    assert.isAbove(
      warmTarget({ rate: 2, launchSeconds: 3, floor: 2, capacity: 20, busy: 0 }),
      warmTarget({ rate: 2, launchSeconds: 1.5, floor: 2, capacity: 20, busy: 0 })
    )
  })

  it("never plans a browser the node cannot place", () => {
    assert.strictEqual(warmTarget({ rate: 5, launchSeconds: 2, floor: 2, capacity: 8, busy: 5 }), 3)
    assert.strictEqual(warmTarget({ rate: 0, launchSeconds: 1, floor: 2, capacity: 4, busy: 4 }), 0)
    assert.strictEqual(warmTarget({ rate: 0, launchSeconds: 1, floor: 2, capacity: 4, busy: 6 }), 0)
  })

  it("reads the rate from a short and a long window: a burst counts at once, a lull slowly", () => {
    const now = 100_000
    const burst = [now - 3000, now - 2000, now - 1000, now - 500, now - 100]
    assert.strictEqual(rateIn(burst, now, 10_000), 0.5)
    assert.closeTo(rateIn(burst, now, 60_000), 5 / 60, 1e-9)
    assert.strictEqual(demandRate(burst, now), 0.5)
    // Thirty seconds later the short window is empty; the long one still remembers.
    assert.closeTo(demandRate(burst, now + 30_000), 5 / 60, 1e-9)
    assert.strictEqual(demandRate(burst, now + 61_000), 0)
  })

  it("forgets arrivals older than the long window", () => {
    const arrivals = [1_000, 2_000, 50_000, 70_000]
    pruneArrivals(arrivals, 62_500)
    assert.deepStrictEqual(arrivals, [50_000, 70_000])
  })

  it("reads the launch time from fast launches, so slow ones under load do not feed more launches", () => {
    assert.strictEqual(launchEstimate([]), 1)
    const recent: Array<number> = []
    for (const seconds of [0.5, 0.45, 0.6, 0.5]) recordLaunch(recent, seconds)
    assert.strictEqual(launchEstimate(recent), 0.45)
    // A burst of slow launches (the machine saturated) barely moves it.
    for (const seconds of [3, 4, 3.5]) recordLaunch(recent, seconds)
    assert.isAtMost(launchEstimate(recent), 0.5)
    // Only the last twenty count.
    for (let i = 0; i < 25; i++) recordLaunch(recent, 2)
    assert.strictEqual(recent.length, 20)
    assert.strictEqual(launchEstimate(recent), 2)
  })

  it("derives MAX_BROWSERS from memory and cores", () => {
    assert.strictEqual(defaultCapacity(24 * GiB, 2), 10)
    assert.strictEqual(defaultCapacity(4 * GiB, 8), 6)
    assert.strictEqual(defaultCapacity(1 * GiB, 1), 1)
  })
})
