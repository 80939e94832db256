import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Scope } from "effect"
import * as Net from "node:net"
import WebSocket, { WebSocketServer } from "ws"
import * as Cdp from "../../../src/platform/cdp/CdpClient.ts"

// The service's own CDP client against a real WebSocket server on loopback
// that answers as Chromium does: `{ id, result }`, `{ id, error }`, events
// without an id. (Against a real Chromium it runs in every browser test.)

interface Command {
  readonly id: number
  readonly method: string
  readonly params: Record<string, unknown>
  readonly sessionId?: string
}

/** A DevTools-like endpoint: `answer` is called with each command and the socket it came on. */
const endpoint = (answer: (command: Command, socket: WebSocket) => void) =>
  Effect.acquireRelease(
    Effect.callback<{
      readonly url: string
      readonly server: WebSocketServer
      readonly closed: Array<number>
    }>((resume) => {
      const closed: Array<number> = []
      const server = new WebSocketServer({ port: 0, host: "127.0.0.1" }, () => {
        const { port } = server.address() as Net.AddressInfo
        resume(Effect.succeed({ url: `ws://127.0.0.1:${port}/devtools/browser/test`, server, closed }))
      })
      server.on("connection", (socket) => {
        socket.on("message", (data) => answer(JSON.parse(data.toString()), socket))
        socket.on("close", (code) => closed.push(code))
      })
    }),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        for (const client of server.clients) client.terminate()
        server.close(() => resume(Effect.void))
      })
  )

const reply = (socket: WebSocket, message: object) => socket.send(JSON.stringify(message))

/** Answers `Echo` with its params and session, and fails anything else as Chromium does. */
const echo = (command: Command, socket: WebSocket) =>
  command.method === "Echo"
    ? reply(socket, { id: command.id, result: { params: command.params, sessionId: command.sessionId } })
    : reply(socket, { id: command.id, error: { code: -32601, message: `'${command.method}' wasn't found` } })

describe("CdpClient", () => {
  it.live("answers a command with its result, and an error reply with its message and code", () =>
    Effect.gen(function* () {
      const { url } = yield* endpoint(echo)
      const client = yield* Cdp.connect(url)
      const answer = yield* client.send<{ params: unknown; sessionId?: string }>("Echo", { a: 1 }, "S1")
      assert.deepStrictEqual(answer, { params: { a: 1 }, sessionId: "S1" })
      const error = yield* Effect.flip(client.send("Nope.nothing"))
      assert.strictEqual(error._tag, "CdpError")
      assert.strictEqual(error.message, "'Nope.nothing' wasn't found (-32601)")
      assert.instanceOf(error, Cdp.CdpError)
    }).pipe(Effect.scoped)
  )

  it.live("fails a command waiting when the connection closes, and any sent after, with CdpError", () =>
    Effect.gen(function* () {
      const { url } = yield* endpoint((command, socket) =>
        command.method === "Browser.close" ? socket.terminate() : echo(command, socket)
      )
      const client = yield* Cdp.connect(url)
      const waiting = yield* Effect.flip(client.send("Browser.close"))
      assert.strictEqual(waiting._tag, "CdpError")
      assert.strictEqual(waiting.message, "CDP connection closed")
      const after = yield* Effect.flip(client.send("Echo"))
      assert.strictEqual(after.message, "CDP connection closed")
      // Dropped, not thrown.
      client.post("Echo")
    }).pipe(Effect.scoped)
  )

  it.live("hands events to their listeners until they unsubscribe", () =>
    Effect.gen(function* () {
      const { url } = yield* endpoint((command, socket) => {
        reply(socket, { method: "Target.targetCreated", params: { n: command.params.n }, sessionId: "S2" })
        echo(command, socket)
      })
      const client = yield* Cdp.connect(url)
      const seen: Array<unknown> = []
      const off = client.on("Target.targetCreated", (params, sessionId) => seen.push([params.n, sessionId]))
      // The event comes before the answer of the command that caused it, as Chromium sends them.
      yield* client.send("Echo", { n: 1 })
      assert.deepStrictEqual(seen, [[1, "S2"]])
      off()
      yield* client.send("Echo", { n: 2 })
      assert.deepStrictEqual(seen, [[1, "S2"]])
    }).pipe(Effect.scoped)
  )

  it.live("a command given up on leaves the connection usable, and a posted one is not waited for", () =>
    Effect.gen(function* () {
      const held: Array<() => void> = []
      const { url } = yield* endpoint((command, socket) =>
        command.method === "Slow"
          ? held.push(() => echo({ ...command, method: "Echo" }, socket))
          : echo(command, socket)
      )
      const client = yield* Cdp.connect(url)
      const slow = yield* Effect.forkChild(client.send("Slow"))
      yield* Effect.sleep("50 millis")
      yield* Fiber.interrupt(slow)
      // Its late answer finds no waiter, and the next command gets its own.
      for (const answer of held.splice(0)) answer()
      client.post("Slow")
      assert.deepStrictEqual(yield* client.send("Echo", { b: 2 }), { params: { b: 2 } })
      assert.lengthOf(held, 1)
    }).pipe(Effect.scoped)
  )

  it.live("closes its socket when the caller's scope closes", () =>
    Effect.gen(function* () {
      const { url, closed } = yield* endpoint(echo)
      const scope = yield* Scope.make()
      const client = yield* Cdp.connect(url).pipe(Scope.provide(scope))
      yield* client.send("Echo")
      yield* Scope.close(scope, Exit.void)
      yield* Effect.sleep("100 millis")
      assert.lengthOf(closed, 1)
      assert.strictEqual((yield* Effect.flip(client.send("Echo"))).message, "CDP connection closed")
    }).pipe(Effect.scoped)
  )

  it.live("fails to connect with CdpError: the socket's own error, or a timeout", () =>
    Effect.gen(function* () {
      // A port nobody listens on: the refusal is the cause, its message the error's.
      const port = yield* Effect.callback<number>((resume) => {
        const probe = Net.createServer().listen(0, "127.0.0.1", () => {
          const { port } = probe.address() as Net.AddressInfo
          probe.close(() => resume(Effect.succeed(port)))
        })
      })
      const refused = yield* Effect.flip(Cdp.connect(`ws://127.0.0.1:${port}/devtools/browser/x`))
      assert.strictEqual(refused._tag, "CdpError")
      assert.include(refused.message, "ECONNREFUSED")
      assert.instanceOf(refused.cause, Error)
      // A server that takes the connection and never answers the upgrade.
      const held: Array<Net.Socket> = []
      const silent = yield* Effect.acquireRelease(
        Effect.callback<Net.Server>((resume) => {
          const server = Net.createServer((socket) => held.push(socket)).listen(0, "127.0.0.1", () =>
            resume(Effect.succeed(server))
          )
        }),
        (server) =>
          Effect.callback<void>((resume) => {
            for (const socket of held) socket.destroy()
            server.close(() => resume(Effect.void))
          })
      )
      const url = `ws://127.0.0.1:${(silent.address() as Net.AddressInfo).port}/devtools/browser/x`
      const timedOut = yield* Effect.flip(Cdp.connect(url, 200))
      assert.strictEqual(timedOut.message, `CDP connect to ${url} timed out`)
      assert.isUndefined(timedOut.cause)
    }).pipe(Effect.scoped)
  )
})
