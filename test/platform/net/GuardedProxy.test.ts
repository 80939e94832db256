import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Net from "node:net"
import { parseCidrs } from "../../../src/platform/config/Cidrs.ts"
import { makeAddressPolicy } from "../../../src/platform/net/AddressPolicy.ts"
import * as GuardedProxy from "../../../src/platform/net/GuardedProxy.ts"

// The proxy in front of a program the service runs for a user: a tunnel to an address the policy
// allows (here 127.0.0.1 alone), a refusal of any other before a connection is tried.

const policy = makeAddressPolicy({
  allow: parseCidrs("127.0.0.1/32").ranges,
  servicePort: () => false,
  isLocalAddress: () => false
})

/** A server on 127.0.0.1 that answers each connection with "hello". */
const greeter = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<Net.Server>((listening) => {
        const server = Net.createServer((socket) => socket.end("hello"))
        server.listen(0, "127.0.0.1", () => listening(server))
      })
  ),
  (server) => Effect.promise(() => new Promise<void>((closed) => server.close(() => closed())))
)

/** A CONNECT through the proxy at `url`: everything it answered until it closed. */
const connect = (url: string, target: string) =>
  Effect.promise(
    () =>
      new Promise<string>((answered) => {
        const { port } = new URL(url)
        const socket = Net.connect(Number(port), "127.0.0.1", () =>
          socket.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n\r\n`)
        )
        let text = ""
        socket.on("data", (chunk: Buffer) => (text += chunk.toString()))
        socket.on("close", () => answered(text))
      })
  )

describe("GuardedProxy", () => {
  it.live("tunnels to an allowed address and refuses the others, naming why, before connecting", () =>
    Effect.gen(function* () {
      const server = yield* greeter
      const refusals: Array<GuardedProxy.Refusal> = []
      const url = yield* GuardedProxy.start(policy, (refusal) => refusals.push(refusal))
      const port = (server.address() as Net.AddressInfo).port
      const tunneled = yield* connect(url, `127.0.0.1:${port}`)
      assert.match(tunneled, /^HTTP\/1\.1 200 /)
      assert.isTrue(tunneled.endsWith("hello"), tunneled)
      const byName = yield* connect(url, `localhost:${port}`)
      assert.isTrue(byName.endsWith("hello"), "a name is resolved here, and its address checked")

      for (const [target, reason] of [
        ["169.254.169.254:80", "link_local"],
        ["10.0.0.1:443", "private"],
        ["[::ffff:10.0.0.1]:443", "private"],
        ["127.0.0.2:443", "loopback"]
      ] as const) {
        const refused = yield* connect(url, target)
        assert.match(refused, /^HTTP\/1\.1 403 /, target)
        assert.include(refused, reason, target)
      }
      assert.deepStrictEqual(
        refusals.map((refusal) => refusal.reason),
        ["link_local", "private", "private", "loopback"]
      )
    }).pipe(Effect.scoped)
  )
})
