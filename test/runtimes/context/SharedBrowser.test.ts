import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Scope } from "effect"
import type { Made } from "../../../src/runtimes/context/BrowserContexts.ts"
import type { LaunchedBrowser } from "../../../src/runtimes/browser/Chromium.ts"
import * as SharedBrowser from "../../../src/runtimes/context/SharedBrowser.ts"

// Which of an account's shared browsers a context session is taken in: pure
// bookkeeping, no Chromium.

const browser = (exited: Deferred.Deferred<void>) => ({ pid: 1, exited }) as unknown as LaunchedBrowser
const made = {} as Made

const host = (key: string, fields: Partial<SharedBrowser.Shared> = {}) =>
  Effect.gen(function* () {
    const exited = yield* Deferred.make<void>()
    const shared = SharedBrowser.make(key, yield* Scope.make(), browser(exited), 0)
    return Object.assign(shared, fields)
  })

describe("SharedBrowser.pick", () => {
  it.effect("prefers a browser with a context made ahead and a free UI thread, then fewer sessions", () =>
    Effect.gen(function* () {
      const busy = yield* host("a", { warm: [made], making: 1, live: 0 })
      const free = yield* host("a", { warm: [made], live: 3 })
      const cold = yield* host("a", { live: 0 })
      assert.strictEqual(SharedBrowser.pick([busy, free, cold], "a", 8), free)
      assert.strictEqual(SharedBrowser.pick([busy, cold], "a", 8), busy, "made ahead beats a free UI thread")
      const disposing = yield* host("a", { warm: [made], disposing: 1 })
      assert.strictEqual(SharedBrowser.pick([disposing, free], "a", 8), free, "disposing is busy too")
      const fewer = yield* host("a", { warm: [made], live: 1 })
      assert.strictEqual(SharedBrowser.pick([free, fewer], "a", 8), fewer)
    })
  )

  it.effect("never another account's or region's, a full, retiring or exited one", () =>
    Effect.gen(function* () {
      const other = yield* host("b", { warm: [made] })
      const full = yield* host("a", { warm: [made], live: 8 })
      const retiring = yield* host("a", { warm: [made], retiring: true })
      const gone = yield* host("a", { warm: [made] })
      yield* Deferred.succeed(gone.browser.exited, undefined)
      assert.isUndefined(SharedBrowser.pick([other, full, retiring, gone], "a", 8))
      const room = yield* host("a", { live: 7 })
      assert.strictEqual(SharedBrowser.pick([other, full, retiring, gone, room], "a", 8), room)
    })
  )
})

describe("SharedBrowser.memoryDue", () => {
  it.effect(
    "reads a browser's memory at its first session's end, then at most every 30 s, never twice at once",
    () =>
      Effect.gen(function* () {
        const fresh = yield* host("a")
        assert.isTrue(SharedBrowser.memoryDue(fresh, 5_000), "never read: due")
        const read = yield* host("a", { measuredAt: 5_000 })
        assert.isFalse(SharedBrowser.memoryDue(read, 5_000 + SharedBrowser.MEMORY_CHECK_INTERVAL_MS - 1))
        assert.isTrue(SharedBrowser.memoryDue(read, 5_000 + SharedBrowser.MEMORY_CHECK_INTERVAL_MS))
        const reading = yield* host("a", { measuring: true })
        assert.isFalse(SharedBrowser.memoryDue(reading, 1_000_000), "one reading at a time")
        const retiring = yield* host("a", { retiring: true })
        assert.isFalse(
          SharedBrowser.memoryDue(retiring, 1_000_000),
          "a retiring browser takes no new session anyway"
        )
      })
  )
})
