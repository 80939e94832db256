import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { RpcSerialization } from "effect/rpc"
import * as Net from "node:net"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Tls from "node:tls"
import { generate } from "selfsigned"
import { isReady, metricValue, request, signUp, waitForSession } from "../../support/Client.ts"
import { SECRETS_KEY, startNode } from "../../support/Nodes.ts"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { Secrets } from "../../../src/platform/crypto/Secrets.ts"
import * as TestService from "../../support/TestService.ts"

// Whoever reaches a node's runner port without the cluster's key: it speaks effect/cluster's own
// protocol, so an answered Ping means it would take any message to any session's entity (close it,
// navigate it, evaluate in it). It must be dropped before a byte of the protocol is read.

/**
 * Sends the protocol's keepalive Ping, framed as effect/cluster's runners frame their messages,
 * over a connection `connect` opens: the tags of what the server answered in 3 s.
 */
const ping = (connect: () => Net.Socket) =>
  Effect.gen(function* () {
    const serialization = yield* RpcSerialization.RpcSerialization
    const parser = serialization.makeUnsafe()
    return yield* Effect.promise(
      () =>
        new Promise<ReadonlyArray<string>>((resolve) => {
          const answered: Array<string> = []
          const socket = connect()
          const done = () => {
            socket.destroy()
            resolve(answered)
          }
          const timer = setTimeout(done, 3_000)
          socket.on("data", (chunk: Buffer) => {
            for (const message of parser.decode(new Uint8Array(chunk)))
              answered.push(String((message as { _tag?: unknown })._tag))
          })
          socket.on("error", () => undefined)
          socket.on("close", () => {
            clearTimeout(timer)
            resolve(answered)
          })
        })
    )
  }).pipe(Effect.provide(RpcSerialization.layerSchemaBinary()))

/** The Ping frame a runner's client sends. */
const pingFrame = Effect.map(
  Effect.provide(Effect.service(RpcSerialization.RpcSerialization), RpcSerialization.layerSchemaBinary()),
  (serialization) => serialization.makeUnsafe().encode({ _tag: "Ping" })!
)

/** A CA, and a certificate it signed for both ends of TLS (PEM). */
const clusterCa = (name: string) =>
  Effect.promise(async () => {
    const ca = await generate([{ name: "commonName", value: `${name} CA` }], {
      keyType: "ec",
      algorithm: "sha256",
      extensions: [
        { name: "basicConstraints", cA: true, critical: true },
        { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true }
      ]
    })
    const node = await generate([{ name: "commonName", value: `${name} node` }], {
      keyType: "ec",
      algorithm: "sha256",
      ca: { key: ca.private, cert: ca.cert },
      extensions: [
        { name: "basicConstraints", cA: false },
        { name: "keyUsage", digitalSignature: true },
        { name: "extKeyUsage", serverAuth: true, clientAuth: true }
      ]
    })
    return { ca: ca.cert, cert: node.cert, key: node.private }
  })

describe("the runner port", () => {
  it.live(
    "drops a connection without the cluster's key, counts it, and leaves the sessions as they were",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const node = yield* startNode(databaseUrl)
        const runnerPort = Number(node.env.RUNNER_ADDRESS.split(":")[1])
        const account = yield* signUp(node.baseUrl)
        const created = yield* request(node.baseUrl, "POST", "/v1/sessions", { key: account.key })
        assert.strictEqual(created.status, 201)
        yield* waitForSession(node.baseUrl, account.key, created.json.id, isReady)

        const frame = yield* pingFrame
        // In the clear, as effect/cluster speaks it: no Pong, and the connection is gone.
        const plain = yield* ping(() => {
          const socket = Net.connect(runnerPort, "127.0.0.1")
          socket.once("connect", () => socket.write(frame))
          return socket
        })
        assert.deepStrictEqual(plain, [], "nothing answered in the clear")
        // Over TLS with a key of its own: the handshake fails, nothing is read.
        const wrongKey = yield* ping(() => {
          const socket = Tls.connect({
            host: "127.0.0.1",
            port: runnerPort,
            ciphers: "ECDHE-PSK-CHACHA20-POLY1305",
            maxVersion: "TLSv1.2",
            pskCallback: () => ({ psk: Buffer.alloc(32, 1), identity: "rbs-node" }),
            checkServerIdentity: () => undefined
          })
          socket.once("secureConnect", () => socket.write(frame))
          return socket
        })
        assert.deepStrictEqual(wrongKey, [], "nothing answered with another key")

        // With the cluster's key, as another node: answered.
        const secrets = yield* Effect.provide(
          Effect.service(Secrets),
          Secrets.layer.pipe(
            Layer.provide(ServiceConfig.layer({ secretsKey: SECRETS_KEY, logLevel: "Error" }))
          )
        )
        const node2node = yield* ping(() => {
          const socket = Tls.connect({
            host: "127.0.0.1",
            port: runnerPort,
            ciphers: "ECDHE-PSK-CHACHA20-POLY1305",
            maxVersion: "TLSv1.2",
            pskCallback: () => ({
              psk: Buffer.from(Redacted.value(secrets.runnerKey)),
              identity: "rbs-node"
            }),
            checkServerIdentity: () => undefined
          })
          socket.once("secureConnect", () => socket.write(frame))
          return socket
        })
        assert.deepStrictEqual(node2node, ["Pong"], "a node is answered")

        const metrics = (yield* request(node.baseUrl, "GET", "/metrics")).text
        assert.isAtLeast(metricValue(metrics, "rbs_runner_connections_refused_total"), 2)
        const after = yield* request(node.baseUrl, "GET", `/v1/sessions/${created.json.id}`, {
          key: account.key
        })
        assert.strictEqual(after.json.status, "ready", "the session is unchanged")
      }).pipe(Effect.scoped)
  )

  it.live("with a cluster CA: a node's certificate is answered, none or another CA's is dropped", () =>
    Effect.gen(function* () {
      const databaseUrl = yield* TestService.freshDatabase
      const dir = yield* TestService.freshDataDir
      const ours = yield* clusterCa("cluster")
      const theirs = yield* clusterCa("stranger")
      const files = {
        RUNNER_TLS_CA: Path.join(dir, "ca.pem"),
        RUNNER_TLS_CERT: Path.join(dir, "node.pem"),
        RUNNER_TLS_KEY: Path.join(dir, "node.key")
      }
      Fs.writeFileSync(files.RUNNER_TLS_CA, ours.ca)
      Fs.writeFileSync(files.RUNNER_TLS_CERT, ours.cert)
      Fs.writeFileSync(files.RUNNER_TLS_KEY, ours.key, { mode: 0o600 })
      const node = yield* startNode(databaseUrl, files)
      const runnerPort = Number(node.env.RUNNER_ADDRESS.split(":")[1])
      const frame = yield* pingFrame
      const over = (options: Tls.ConnectionOptions) =>
        ping(() => {
          const socket = Tls.connect({
            host: "127.0.0.1",
            port: runnerPort,
            checkServerIdentity: () => undefined,
            ...options
          })
          socket.once("secureConnect", () => socket.write(frame))
          return socket
        })
      assert.deepStrictEqual(yield* over({ ca: ours.ca, cert: ours.cert, key: ours.key }), ["Pong"], "a node")
      assert.deepStrictEqual(yield* over({ ca: ours.ca }), [], "no certificate")
      assert.deepStrictEqual(
        yield* over({ ca: ours.ca, cert: theirs.cert, key: theirs.key }),
        [],
        "another CA's"
      )
      // The node's own certificate is checked too: a client that trusts only the stranger's CA gets nowhere.
      assert.deepStrictEqual(yield* over({ ca: theirs.ca, cert: ours.cert, key: ours.key }), [])
      const metrics = (yield* request(node.baseUrl, "GET", "/metrics")).text
      assert.isAtLeast(metricValue(metrics, "rbs_runner_connections_refused_total"), 2)
      // The node itself runs on it: a session starts.
      const account = yield* signUp(node.baseUrl)
      const created = yield* request(node.baseUrl, "POST", "/v1/sessions", { key: account.key })
      assert.strictEqual(created.status, 201)
      yield* waitForSession(node.baseUrl, account.key, created.json.id, isReady)
    }).pipe(Effect.scoped)
  )
})
