import { assert, describe, it } from "@effect/vitest"
import { FrameThrottle, type Timers } from "../../../src/runtimes/shared/FrameThrottle.ts"

/** Timers driven by hand: `advance` runs what falls due, in order. */
const manualTimers = () => {
  let now = 0
  let next = 0
  const due = new Map<number, { at: number; run: () => void }>()
  const timers: Timers = {
    now: () => now,
    set: (run, delayMs) => {
      const handle = next++
      due.set(handle, { at: now + delayMs, run })
      return handle
    },
    clear: (handle) => {
      due.delete(handle as number)
    }
  }
  const advance = (ms: number) => {
    const until = now + ms
    while (true) {
      const first = [...due.entries()].sort((a, b) => a[1].at - b[1].at)[0]
      if (first === undefined || first[1].at > until) break
      due.delete(first[0])
      now = first[1].at
      first[1].run()
    }
    now = until
  }
  return { timers, advance }
}

const setUp = () => {
  const { timers, advance } = manualTimers()
  const emitted: Array<{ frame: number; at: number }> = []
  const acked: Array<{ frame: number; at: number }> = []
  const throttle = new FrameThrottle<number>({
    intervalMs: 200,
    ackLeadMs: 50,
    emit: (frame) => emitted.push({ frame, at: timers.now() }),
    ack: (frame) => acked.push({ frame, at: timers.now() }),
    timers
  })
  return { throttle, advance, emitted, acked, now: timers.now }
}

describe("FrameThrottle", () => {
  it("sends a change after a quiet moment at once, not at the next slot", () => {
    const { throttle, advance, emitted, acked } = setUp()
    throttle.push(1)
    advance(1000)
    throttle.push(2)
    assert.deepStrictEqual(emitted, [
      { frame: 1, at: 0 },
      { frame: 2, at: 1000 }
    ])
    assert.deepStrictEqual(
      acked.map((a) => a.frame),
      [1, 2]
    )
  })

  it("keeps the newest of the frames within one interval and sends it at the slot", () => {
    const { throttle, advance, emitted } = setUp()
    throttle.push(1)
    advance(20)
    throttle.push(2)
    advance(20)
    throttle.push(3)
    advance(100)
    throttle.push(4)
    assert.strictEqual(emitted.length, 1, "nothing before the slot")
    advance(60)
    assert.deepStrictEqual(emitted, [
      { frame: 1, at: 0 },
      { frame: 4, at: 200 }
    ])
  })

  it("never emits more than one frame per interval, however fast frames come", () => {
    const { throttle, advance, emitted, acked } = setUp()
    // A page repainting 60 times a second for ten seconds, each frame acknowledged as asked.
    for (let t = 0; t < 10_000; t += 16) {
      throttle.push(t)
      advance(16)
    }
    advance(400)
    for (let i = 1; i < emitted.length; i++) {
      assert.isAtLeast(emitted[i]!.at - emitted[i - 1]!.at, 200)
    }
    assert.isAtMost(emitted.length, 51)
    assert.isAtLeast(emitted.length, 49)
    // The last frame pushed is the last one shown: the final state is never lost.
    assert.strictEqual(emitted[emitted.length - 1]!.frame, 9984)
    // Every frame is acknowledged exactly once, or the browser would stall.
    assert.strictEqual(acked.length, 625)
    assert.strictEqual(new Set(acked.map((a) => a.frame)).size, 625)
  })

  it("holds acknowledgements until shortly before the slot, so the browser captures fresh frames at that pace", () => {
    const { throttle, advance, acked } = setUp()
    throttle.push(1)
    advance(16)
    throttle.push(2)
    advance(16)
    throttle.push(3)
    assert.deepStrictEqual(
      acked.map((a) => a.frame),
      [1],
      "held frames wait"
    )
    advance(118)
    assert.deepStrictEqual(acked, [
      { frame: 1, at: 0 },
      { frame: 2, at: 150 },
      { frame: 3, at: 150 }
    ])
    // After the early acknowledgement, frames wait for the slot itself.
    throttle.push(4)
    advance(49)
    assert.strictEqual(acked.length, 3)
    advance(1)
    assert.deepStrictEqual(acked[3], { frame: 4, at: 200 })
  })

  it("acknowledges what it holds when closed, and every later frame at once", () => {
    const { throttle, advance, emitted, acked } = setUp()
    throttle.push(1)
    throttle.push(2)
    throttle.close()
    throttle.push(3)
    advance(1000)
    assert.deepStrictEqual(
      emitted.map((e) => e.frame),
      [1]
    )
    assert.deepStrictEqual(
      acked.map((a) => a.frame),
      [1, 2, 3]
    )
  })
})
