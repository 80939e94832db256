import { assert, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import * as Net from "node:net"
import { metricValue, openSession, request, signUp } from "../../support/Client.ts"
import * as RawCdp from "../../support/RawCdp.ts"
import * as TestService from "../../support/TestService.ts"

// What a tenant may hold of a node through its live connections: no client message past the
// relay's limit is read (the connection is closed 1009 as the frame's header arrives), and a
// session, or an account on a node, holds no more connections than its limit.

const MiB = 1024 * 1024

/**
 * A WebSocket upgrade of `url` on a raw socket, then a frame header announcing `bytes` of payload and
 * the first of them: what the service answers (its close frame's code), and whether it kept reading.
 */
const oversizedFrame = (url: string, key: string, bytes: number) =>
  Effect.promise(
    () =>
      new Promise<{ readonly status: string; readonly closeCode: number | undefined }>((resolve, reject) => {
        const target = new URL(url)
        const socket = Net.connect(Number(target.port), target.hostname)
        let buffered = Buffer.alloc(0)
        let upgraded = false
        let status = ""
        socket.on("data", (chunk: Buffer) => {
          buffered = Buffer.concat([buffered, chunk])
          if (!upgraded) {
            const end = buffered.indexOf("\r\n\r\n")
            if (end < 0) return
            status = buffered.subarray(0, buffered.indexOf("\r\n")).toString()
            buffered = buffered.subarray(end + 4)
            upgraded = true
            if (!status.includes(" 101 ")) return socket.destroy()
            // A masked binary frame of `bytes` (64-bit length), of which only 64 KiB follow.
            const header = Buffer.alloc(14)
            header[0] = 0x82
            header[1] = 0x80 | 127
            header.writeBigUInt64BE(BigInt(bytes), 2)
            Crypto.randomFillSync(header, 10, 4)
            socket.write(Buffer.concat([header, Buffer.alloc(64 * 1024)]))
          }
          // The server's close frame: opcode 8, its code in the first two bytes of the payload.
          if (upgraded && buffered.length >= 4 && (buffered[0]! & 0x0f) === 8) {
            resolve({ status, closeCode: buffered.readUInt16BE(2) })
            socket.destroy()
          }
        })
        socket.on("error", () => resolve({ status, closeCode: undefined }))
        socket.on("close", () => resolve({ status, closeCode: undefined }))
        socket.once("connect", () =>
          socket.write(
            `GET ${target.pathname} HTTP/1.1\r\nHost: ${target.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
              `Sec-WebSocket-Key: ${Crypto.randomBytes(16).toString("base64")}\r\nSec-WebSocket-Version: 13\r\n` +
              `Authorization: Bearer ${key}\r\n\r\n`
          )
        )
        socket.setTimeout(20_000, () => reject(new Error("no answer to the frame")))
      })
  )

/** The answer to a WebSocket upgrade of `url`: 101, or the refusal's status and body. */
const upgradeAnswer = (url: string, key: string) =>
  Effect.promise(
    () =>
      new Promise<{ readonly status: number; readonly body: any }>((resolve, reject) => {
        const outgoing = Http.get(url.replace(/^ws/, "http"), {
          headers: {
            authorization: `Bearer ${key}`,
            upgrade: "websocket",
            connection: "Upgrade",
            "sec-websocket-key": Crypto.randomBytes(16).toString("base64"),
            "sec-websocket-version": "13"
          }
        })
        outgoing.once("upgrade", (_response, socket) => {
          socket.destroy()
          resolve({ status: 101, body: undefined })
        })
        outgoing.once("response", (response) => {
          let text = ""
          response.setEncoding("utf8")
          response.on("data", (chunk: string) => (text += chunk))
          response.once("end", () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) }))
        })
        outgoing.once("error", reject)
      })
  )

layer(TestService.layer({ limits: { connectionsPerSession: 8, connectionsPerAccount: 12 } }), {
  excludeTestServices: true
})("the relay's bounds", (it) => {
  it.effect(
    "eight frames of 400 MB are closed 1009 as their headers arrive, and the node answers meanwhile",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const session = yield* openSession(service.baseUrl, account.key)
        const healthz: Array<number> = []
        let probing = true
        const probe = Effect.promise(async () => {
          while (probing) {
            const started = performance.now()
            await fetch(`${service.baseUrl}/healthz`)
            healthz.push(performance.now() - started)
            await new Promise((resolve) => setTimeout(resolve, 20))
          }
        })
        const probes = yield* Effect.forkChild(probe)
        const closes = yield* Effect.all(
          Array.from({ length: 8 }, () => oversizedFrame(session.cdp_url, account.key, 400 * MiB)),
          { concurrency: "unbounded" }
        )
        probing = false
        yield* Fiber.join(probes)
        for (const close of closes) {
          assert.include(close.status, " 101 ")
          assert.strictEqual(close.closeCode, 1009, "closed as too big, before the frame was read")
        }
        assert.isBelow(
          Math.max(...healthz),
          250,
          `/healthz took up to ${Math.round(Math.max(...healthz))} ms`
        )
        const metrics = (yield* request(service.baseUrl, "GET", "/metrics")).text
        assert.isAtLeast(metricValue(metrics, "rbs_relay_messages_refused_total", 'reason="too_large"'), 8)
        // The session is no worse for it.
        const cdp = yield* RawCdp.connect(session.cdp_url, { authorization: `Bearer ${account.key}` })
        assert.match((yield* cdp.call(1, "Browser.getVersion")).result.product, /Chrome/)
      }).pipe(Effect.scoped)
  )

  it.effect("a session takes its limit of connections, an account on a node its own; the next is 429", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const headers = { authorization: `Bearer ${account.key}` }
      const first = yield* openSession(service.baseUrl, account.key)
      for (let i = 0; i < 8; i++) yield* RawCdp.connect(first.cdp_url, headers)
      const refused = yield* upgradeAnswer(first.cdp_url, account.key)
      assert.strictEqual(refused.status, 429)
      assert.strictEqual(refused.body.error.code, "connection_limit")
      // Another session of the account: 4 more, up to the account's 12 on this node.
      const second = yield* openSession(service.baseUrl, account.key)
      for (let i = 0; i < 4; i++) yield* RawCdp.connect(second.cdp_url, headers)
      const past = yield* upgradeAnswer(second.cdp_url, account.key)
      assert.strictEqual(past.status, 429)
      assert.match(past.body.error.message, /account/)
      // Another account is not held back by this one.
      const other = yield* signUp(service.baseUrl)
      const theirs = yield* openSession(service.baseUrl, other.key)
      const cdp = yield* RawCdp.connect(theirs.cdp_url, { authorization: `Bearer ${other.key}` })
      assert.match((yield* cdp.call(1, "Browser.getVersion")).result.product, /Chrome/)
    }).pipe(Effect.scoped)
  )
})
