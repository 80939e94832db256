import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import * as McpSessions from "../../../src/edge/mcp/McpSessions.ts"

const ME = "acct_1|key:k1"

describe("McpSessions", () => {
  it("a session is its opener's alone: another caller finds none by its id", () => {
    const sessions = McpSessions.make()
    const mine = sessions.open("2025-11-25", ME, "acct_1")
    assert.strictEqual(sessions.find(mine.id, ME), mine)
    assert.isUndefined(sessions.find(mine.id, "acct_2|key:k2"), "another tenant")
    assert.isUndefined(sessions.find(mine.id, "acct_1|key:k3"), "another key of the same account")
    assert.strictEqual(sessions.find(mine.id, ME), mine, "still there for its opener")
  })

  it("forgets the session used least recently once full, and a forgotten id is not found", () => {
    const sessions = McpSessions.make(2)
    const a = sessions.open("2025-11-25", ME, "acct_1")
    const b = sessions.open("2025-06-18", ME, "acct_1")
    // Using `a` makes `b` the least recently used.
    assert.strictEqual(sessions.find(a.id, ME), a)
    const c = sessions.open("2025-03-26", ME, "acct_1")
    assert.strictEqual(sessions.size(), 2)
    assert.isUndefined(sessions.find(b.id, ME))
    assert.strictEqual(sessions.find(a.id, ME)?.protocol, "2025-11-25")
    assert.strictEqual(sessions.find(c.id, ME)?.protocol, "2025-03-26")
    assert.notStrictEqual(a.id, c.id)
  })

  it("past its account's cap, a new session forgets that account's least recently used, never another's", () => {
    const sessions = McpSessions.make(10, 2)
    const theirs = sessions.open("2025-11-25", "acct_2|key:k2", "acct_2")
    const first = sessions.open("2025-11-25", ME, "acct_1")
    // Another principal of the same account shares its cap.
    const second = sessions.open("2025-11-25", "acct_1|key:k3", "acct_1")
    // Using `first` makes `second` the account's least recently used; `theirs` is the node's.
    assert.strictEqual(sessions.find(first.id, ME), first)
    const third = sessions.open("2025-11-25", ME, "acct_1")
    assert.isUndefined(sessions.find(second.id, "acct_1|key:k3"), "the account's own oldest is forgotten")
    assert.strictEqual(sessions.find(first.id, ME), first)
    assert.strictEqual(sessions.find(third.id, ME), third)
    assert.strictEqual(sessions.find(theirs.id, "acct_2|key:k2"), theirs, "another account's stays")
    assert.strictEqual(sessions.size(), 3)
    // A session ended frees its account's place: the next one forgets nothing.
    assert.isTrue(sessions.end(first.id))
    const fourth = sessions.open("2025-11-25", ME, "acct_1")
    assert.deepStrictEqual(
      [third, fourth].map((session) => sessions.find(session.id, ME)),
      [third, fourth]
    )
  })

  it("keeps the node's cap across accounts as a backstop", () => {
    const sessions = McpSessions.make(2, 2)
    const a = sessions.open("2025-11-25", ME, "acct_1")
    const b = sessions.open("2025-11-25", "acct_2|key:k2", "acct_2")
    const c = sessions.open("2025-11-25", "acct_3|key:k3", "acct_3")
    assert.strictEqual(sessions.size(), 2)
    assert.isUndefined(sessions.find(a.id, ME))
    assert.strictEqual(sessions.find(b.id, "acct_2|key:k2"), b)
    assert.strictEqual(sessions.find(c.id, "acct_3|key:k3"), c)
    // The forgotten one's account has its place back.
    const d = sessions.open("2025-11-25", ME, "acct_1")
    const e = sessions.open("2025-11-25", ME, "acct_1")
    assert.deepStrictEqual(
      [d, e].map((session) => sessions.find(session.id, ME)),
      [d, e]
    )
  })

  it.effect("a cancel of a request's id stops that call alone, and its session goes on", () =>
    Effect.gen(function* () {
      const sessions = McpSessions.make()
      const session = sessions.open("2025-11-25", ME, "acct_1")
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
      const session = sessions.open("2025-06-18", ME, "acct_1")
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
      const first = sessions.open("2025-11-25", ME, "acct_1")
      const started = yield* Deferred.make<void>()
      const slow = yield* sessions
        .track(first, 1, Effect.andThen(Deferred.succeed(started, undefined), Effect.never))
        .pipe(Effect.forkChild)
      yield* Deferred.await(started)
      sessions.open("2025-11-25", ME, "acct_1")
      assert.deepStrictEqual(yield* Fiber.join(slow), { _tag: "Ended" })
    })
  )
})
