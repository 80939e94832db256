import { assert, describe, it } from "@effect/vitest"
import { parseRange } from "../../../src/edge/http/ByteRange.ts"

describe("parseRange", () => {
  it("reads one range, an open end and a suffix, clamped to the body", () => {
    assert.deepStrictEqual(parseRange("bytes=0-99", 1000), { start: 0, end: 99 })
    assert.deepStrictEqual(parseRange("bytes=900-", 1000), { start: 900, end: 999 })
    assert.deepStrictEqual(parseRange("bytes=900-5000", 1000), { start: 900, end: 999 })
    assert.deepStrictEqual(parseRange("bytes=-10", 1000), { start: 990, end: 999 })
    assert.deepStrictEqual(parseRange("bytes=-5000", 1000), { start: 0, end: 999 })
  })

  it("serves the whole body for no header or one it does not serve, and refuses what is past the end", () => {
    for (const header of [undefined, "", "items=0-1", "bytes=0-1,5-6", "bytes=-", "bytes=a-b"]) {
      assert.isUndefined(parseRange(header, 1000), String(header))
    }
    for (const header of ["bytes=1000-", "bytes=5-4", "bytes=-0"]) {
      assert.strictEqual(parseRange(header, 1000), "unsatisfiable", header)
    }
  })
})
