import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import * as Tls from "node:tls"
import puppeteer from "puppeteer-core"
import { generate } from "selfsigned"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { ownerOf, placementSettled, startNode } from "../../support/Nodes.ts"
import * as TestService from "../../support/TestService.ts"

/**
 * A TLS terminator in front of a node's HTTP port, as an operator puts one: it takes TLS on its own
 * port and passes the plain bytes to `target`. It counts the handshakes it completed, and the
 * connections that came in clear (which it cannot serve).
 */
const terminator = (target: number, pems: { readonly cert: string; readonly private: string }) =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<{ server: Tls.Server; port: number; handshakes: () => number }>((resolve) => {
          let handshakes = 0
          const server = Tls.createServer({ cert: pems.cert, key: pems.private }, (secure) => {
            handshakes++
            const plain = Net.connect(target, "127.0.0.1")
            secure.pipe(plain).pipe(secure)
            const close = () => {
              secure.destroy()
              plain.destroy()
            }
            secure.on("error", close)
            plain.on("error", close)
            secure.on("close", close)
            plain.on("close", close)
          })
          server.on("tlsClientError", () => undefined)
          server.listen(0, "127.0.0.1", () =>
            resolve({
              server,
              port: (server.address() as Net.AddressInfo).port,
              handshakes: () => handshakes
            })
          )
        })
    ),
    ({ server }) => Effect.sync(() => server.close())
  )

describe("several nodes: HTTP between them over TLS", () => {
  it.live(
    "a node whose NODE_URL is https:// behind a TLS terminator is reached over TLS, trusting a private CA from NODE_EXTRA_CA_CERTS: CDP through another node works",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const pems = yield* Effect.promise(() =>
          generate([{ name: "commonName", value: "127.0.0.1" }], {
            keySize: 2048,
            algorithm: "sha256",
            extensions: [{ name: "subjectAltName", altNames: [{ type: 7, ip: "127.0.0.1" }] }]
          })
        )
        const dir = yield* TestService.freshDataDir
        const caFile = Path.join(dir, "cluster-ca.pem")
        Fs.writeFileSync(caFile, pems.cert)

        const bPort = yield* TestService.freePort
        const tls = yield* terminator(bPort, pems)
        // A trusts the private CA; B is reached only at its https:// NODE_URL.
        const a = yield* startNode(databaseUrl, { MAX_BROWSERS: "2", NODE_EXTRA_CA_CERTS: caFile })
        const b = yield* startNode(databaseUrl, {
          MAX_BROWSERS: "8",
          PORT: String(bPort),
          NODE_URL: `https://127.0.0.1:${tls.port}`
        })
        // C does not trust the CA: B is unreachable to it.
        const c = yield* startNode(databaseUrl, { MAX_BROWSERS: "1" })
        yield* placementSettled(databaseUrl, [a, b, c])

        const account = yield* signUp(a.baseUrl)
        const created = yield* request(a.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
        assert.strictEqual(created.status, 201, created.text)
        yield* waitForSession(a.baseUrl, account.key, created.json.id, isReady)
        const owner = yield* ownerOf(databaseUrl, created.json.id)
        assert.deepStrictEqual([owner.node_id, owner.node_url], [b.nodeId, `https://127.0.0.1:${tls.port}`])

        const before = tls.handshakes()
        const title = yield* Effect.acquireUseRelease(
          Effect.promise(() =>
            puppeteer.connect({
              browserWSEndpoint: `${a.baseUrl.replace("http://", "ws://")}/sessions/${created.json.id}`,
              headers: { Authorization: `Bearer ${account.key}` }
            })
          ),
          (browser) =>
            Effect.promise(async () => {
              const tab = await browser.newPage()
              await tab.goto("data:text/html,<title>over tls</title>")
              return tab.title()
            }),
          (browser) => Effect.promise(() => browser.disconnect().catch(() => {}))
        )
        assert.strictEqual(title, "over tls")
        assert.isAbove(tls.handshakes(), before, "A reached B's session through the terminator, over TLS")

        const untrusted = yield* Effect.promise(() =>
          puppeteer
            .connect({
              browserWSEndpoint: `${c.baseUrl.replace("http://", "ws://")}/sessions/${created.json.id}`,
              headers: { Authorization: `Bearer ${account.key}` }
            })
            .then(
              (browser) => browser.disconnect().then(() => "connected"),
              (error: Error) => error.message
            )
        )
        assert.include(untrusted, "409", "a node that cannot verify B's certificate does not reach it")
      }).pipe(Effect.scoped),
    180_000
  )
})
