import { assert, describe, it } from "@effect/vitest"
import { chargeEgress, formatUsd, usdToMicro } from "../../../src/features/billing/Money.ts"

describe("Money", () => {
  it("charges whole micro-dollars at 200 bytes each and carries the rest", () => {
    assert.deepStrictEqual(chargeEgress(1_000_000_000n, 0n), { charge: 5_000_000n, carry: 0n })
    assert.deepStrictEqual(chargeEgress(199n, 0n), { charge: 0n, carry: 199n })
    assert.deepStrictEqual(chargeEgress(1n, 199n), { charge: 1n, carry: 0n })
    assert.deepStrictEqual(chargeEgress(1_234_567n, 150n), { charge: 6173n, carry: 117n })
  })

  it("loses nothing over many small sessions", () => {
    let carry = 0n
    let charged = 0n
    const sessions = Array.from({ length: 1000 }, (_, i) => BigInt((i * 7919) % 1000))
    for (const bytes of sessions) {
      const result = chargeEgress(bytes, carry)
      charged += result.charge
      carry = result.carry
    }
    const total = sessions.reduce((a, b) => a + b, 0n)
    assert.strictEqual(charged * 200n + carry, total)
  })

  it("formats micro-USD exactly", () => {
    assert.strictEqual(formatUsd(usdToMicro(10)), "10.000000")
    assert.strictEqual(formatUsd(19_000n), "0.019000")
    assert.strictEqual(formatUsd(-1n), "-0.000001")
  })
})
