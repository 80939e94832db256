import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import * as McpSessions from "../../../src/edge/mcp/McpSessions.ts"

const ME = "acct_1|key:k1"

describe("McpSessions", () => {
  it("a session is its opener's alone: another caller finds none by its id", () => {
    const sessions = McpSessions.make()
    const mine = sessions.open("2025-11-25", ME)
    assert.strictEqual(sessions.find(mine.id, ME), mine)
    assert.isUndefined(sessions.find(mine.id, "acct_2|key:k2"), "another tenant")
    assert.isUndefined(sessions.find(mine.id, "acct_1|key:k3"), "another key of the same account")
    assert.strictEqual(sessions.find(mine.id, ME), mine, "still there for its opener")
  })

  it("forgets the session used least recently once full, and a forgotten id is not found", () => {
    const sessions = McpSessions.make(2)
    const a = sessions.open("2025-11-25", ME)
    const b = sessions.open("2025-06-18", ME)
    // Using `a` makes `b` the least recently used.
    assert.strictEqual(sessions.find(a.id, ME), a)
    const c = sessions.open("2025-03-26", ME)
    assert.strictEqual(sessions.size(), 2)
    assert.isUndefined(sessions.find(b.id, ME))
    assert.strictEqual(sessions.find(a.id, ME)?.protocol, "2025-11-25")
    assert.strictEqual(sessions.find(c.id, ME)?.protocol, "2025-03-26")
    assert.notStrictEqual(a.id, c.id)
  })

  it.effect("a cancel of a request's id stops that call alone, and its session goes on", () =>
    Effect.gen(function* () {
      const sessions = McpSessions.make()
      const session = sessions.open("2025-11-25", ME)
      const started = yield* Deferred.make<void>()
      const slow = yield* sessions
        .track(session, 7, Effect.andThen(Deferred.succeed(started, undefined), Effect.never))
        .pipe(Effect.forkChild)
      const other = yield* sessions.track(session, "7", Effect.succeed("answered")).pipe(Effect.forkChild)
      yield* Deferred.await(started)
      // The id "7" (a string) is another request than 7.
      sessions.cancel(session, 8)
      sessions.cancel(session, 7)
      assert.deepStrictEqual(yield* Fiber.join(slow), { _tag: "Cancelled" })
      assert.deepStrictEqual(yield* Fiber.join(other), { _tag: "Done", value: "answered" })
      assert.strictEqual(session.inFlight.size, 0)
      assert.deepStrictEqual(yield* sessions.track(session, 7, Effect.succeed(1)), { _tag: "Done", value: 1 })
    })
  )

  it.effect("ending a session stops its calls in flight, and a call after its end does not run", () =>
    Effect.gen(function* () {
      const sessions = McpSessions.make()
      const session = sessions.open("2025-06-18", ME)
      const started = yield* Deferred.make<void>()
      let ran = false
      const slow = yield* sessions
        .track(session, 1, Effect.andThen(Deferred.succeed(started, undefined), Effect.never))
        .pipe(Effect.forkChild)
      yield* Deferred.await(started)
      assert.isTrue(sessions.end(session.id))
      assert.isFalse(sessions.end(session.id))
      assert.deepStrictEqual(yield* Fiber.join(slow), { _tag: "Ended" })
      const late = yield* sessions.track(
        session,
        2,
        Effect.sync(() => {
          ran = true
        })
      )
      assert.deepStrictEqual(late, { _tag: "Ended" })
      assert.isFalse(ran)
    })
  )

  it.effect("a session forgotten for room ends its calls as a DELETE does", () =>
    Effect.gen(function* () {
      const sessions = McpSessions.make(1)
      const first = sessions.open("2025-11-25", ME)
      const started = yield* Deferred.make<void>()
      const slow = yield* sessions
        .track(first, 1, Effect.andThen(Deferred.succeed(started, undefined), Effect.never))
        .pipe(Effect.forkChild)
      yield* Deferred.await(started)
      sessions.open("2025-11-25", ME)
      assert.deepStrictEqual(yield* Fiber.join(slow), { _tag: "Ended" })
    })
  )
})
