import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option } from "effect"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { encode, FrameReader } from "../../../src/runtimes/sandbox/Frames.ts"
import { SupervisorLink } from "../../../src/runtimes/sandbox/Supervisor.ts"

// The link's own bookkeeping (its queue of operations waiting for a connection, its end) against
// connections made the way the supervisor makes them; the supervisor itself is tested through the
// routes in a real sandbox (Commands, Terminals, Isolation).

/** A link listening in a temporary dir, and its supervisor's lifeline connected. */
const linked = Effect.gen(function* () {
  const dir = yield* Effect.acquireRelease(
    Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-link-"))),
    (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
  )
  const path = Path.join(dir, "control.sock")
  const link = yield* Effect.acquireRelease(SupervisorLink.listen(path, process.getuid?.() ?? 0), (link) =>
    Effect.sync(() => link.close())
  )
  /** A connection as the supervisor opens one; `answer` replies to each request frame. */
  const connect = (answer: (type: string, socket: Net.Socket) => void = () => undefined) =>
    Effect.acquireRelease(
      Effect.callback<Net.Socket>((resume) => {
        const socket: Net.Socket = Net.connect(path, () => resume(Effect.succeed(socket)))
        const reader = new FrameReader()
        socket.on("data", (chunk: Buffer) => {
          for (const frame of reader.push(chunk)) answer(frame.type, socket)
        })
        socket.on("error", () => undefined)
      }),
      (socket) => Effect.sync(() => socket.destroy())
    )
  const lifeline = yield* connect()
  yield* Deferred.await(link.ready)
  return { link, connect, lifeline }
})

const versionAnswer = (type: string, socket: Net.Socket) => {
  if (type === "V") socket.write(encode("V", "fake 1"))
}

describe("SupervisorLink", () => {
  it.live("an operation interrupted while it waits for a connection gives its place up", () =>
    Effect.gen(function* () {
      const { link, connect } = yield* linked
      const gaveUp = yield* link.version().pipe(Effect.timeoutOption("100 millis"))
      assert.isTrue(Option.isNone(gaveUp), "no connection to take: it waits")
      // The next connection goes to the next operation, not to the one that gave up.
      yield* connect(versionAnswer)
      const answered = yield* link.version().pipe(Effect.timeoutOption("5 seconds"))
      assert.deepStrictEqual(answered, Option.some("fake 1"))
    }).pipe(Effect.scoped)
  )

  it.live(
    "a refusal fails with the supervisor's message; once the sandbox has ended, every operation fails",
    () =>
      Effect.gen(function* () {
        const { link, connect, lifeline } = yield* linked
        yield* connect((type, socket) => {
          if (type === "S") socket.write(encode("E", "fork: Resource temporarily unavailable"))
        })
        const refused = yield* Effect.flip(link.spawn({ argv: ["true"] }, () => undefined))
        assert.strictEqual(refused._tag, "SupervisorError")
        assert.strictEqual(refused.message, "fork: Resource temporarily unavailable")
        assert.isFalse(refused.sandboxEnded)

        // Waiting for a connection when the supervisor goes: it fails at once, typed.
        const waiting = yield* Effect.forkChild(Effect.flip(link.spawn({ argv: ["true"] }, () => undefined)))
        yield* Effect.sleep("50 millis")
        lifeline.destroy()
        const gone = yield* Fiber.join(waiting)
        assert.strictEqual(gone._tag, "SupervisorError")
        assert.strictEqual(gone.message, "the sandbox has ended")
        assert.isTrue(gone.sandboxEnded)
        yield* Deferred.await(link.dead)

        const ended = (
          operation: Effect.Effect<unknown, { readonly message: string; readonly _tag: string }>
        ) => Effect.map(Effect.flip(operation), (error) => `${error._tag}: ${error.message}`)
        const after = [
          link.spawn({ argv: ["true"] }, () => undefined),
          link.readFile("/etc/hostname"),
          link.writeFile("/tmp/x", 0o644, (async function* () {})()),
          link.dial(8000),
          link.version()
        ]
        const expected = after.map(() => "SupervisorError: the sandbox has ended")
        assert.deepStrictEqual(yield* Effect.forEach(after, ended), expected)
        link.close()
        assert.deepStrictEqual(yield* Effect.forEach(after, ended), expected, "and once the link is closed")
      }).pipe(Effect.scoped)
  )
})
