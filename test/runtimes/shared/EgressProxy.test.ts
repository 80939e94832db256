import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import * as FsSync from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { AdHosts } from "../../../src/platform/net/AdHosts.ts"
import { Egress } from "../../../src/platform/net/Egress.ts"
import { EgressProxies } from "../../../src/runtimes/shared/EgressProxy.ts"
import { LocalPorts } from "../../../src/platform/net/LocalPorts.ts"
import * as ProxyChain from "proxy-chain"
import * as TrafficServer from "../../support/TrafficServer.ts"

/** A fresh path for a proxy's socket, in a dir removed with the scope. */
const socketPath = Effect.acquireRelease(
  Effect.sync(() => FsSync.mkdtempSync(Path.join(Os.tmpdir(), "rbs-egress-test-"))),
  (dir) => Effect.sync(() => FsSync.rmSync(dir, { recursive: true, force: true }))
).pipe(Effect.map((dir) => Path.join(dir, "egress.sock")))

/** A plain HTTP request through the proxy, as a browser sends it (absolute URI). */
const viaProxy = (proxy: string, url: string) =>
  Effect.promise(
    () =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const request = Http.request(
          {
            socketPath: proxy,
            path: url,
            headers: { host: new URL(url).host },
            agent: false
          },
          (response) => {
            let body = ""
            response.on("data", (chunk) => (body += chunk))
            response.on("end", () => resolve({ status: response.statusCode ?? 0, body }))
          }
        )
        request.on("error", reject)
        request.end()
      })
  )

/** A CONNECT tunnel through the proxy, then a raw HTTP/1.1 GET inside it. */
const tunnel = (proxy: string, target: string, path: string) =>
  Effect.promise(
    () =>
      new Promise<{ status: string; bytes: number }>((resolve, reject) => {
        const socket = Net.connect(proxy, () =>
          socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`)
        )
        let buffer = Buffer.alloc(0)
        let status = ""
        socket.on("data", (chunk: Buffer) => {
          buffer = Buffer.concat([buffer, chunk])
          if (status === "") {
            const end = buffer.indexOf("\r\n\r\n")
            if (end < 0) return
            status = buffer.subarray(0, buffer.indexOf("\r\n")).toString()
            buffer = buffer.subarray(end + 4)
            if (!status.includes(" 200 ")) return socket.end()
            socket.write(`GET ${path} HTTP/1.1\r\nHost: ${target}\r\nConnection: close\r\n\r\n`)
          }
        })
        socket.on("close", () => resolve({ status, bytes: buffer.length }))
        socket.on("error", reject)
      })
  )

/** The service's egress proxies with `allow` open in the SSRF guard. */
const proxiesAllowing = (allow: string) =>
  EgressProxies.layerNoDeps.pipe(
    Layer.provideMerge(Egress.layer),
    Layer.provideMerge(AdHosts.layer),
    Layer.provideMerge(LocalPorts.layer),
    Layer.provide(ServiceConfig.layer({ egressAllowCidrs: allow, logLevel: "Error" }))
  )

describe("EgressProxies", () => {
  it.live(
    "refuses everything until bound; then meters exactly what crossed the wire to the destination",
    () =>
      Effect.gen(function* () {
        const traffic = yield* TrafficServer.serve("127.0.0.1")
        const proxies = yield* EgressProxies
        const egress = yield* Egress
        const listener = yield* proxies.listen(yield* socketPath)
        assert.strictEqual(FsSync.statSync(listener.path).mode & 0o777, 0o600, "its owner's alone")

        const unbound = yield* viaProxy(listener.path, `${traffic.http}/page`)
        assert.strictEqual(unbound.status, 403)
        assert.include(unbound.body, "not serving a session")
        assert.deepStrictEqual(traffic.requests(), [], "nothing reached the destination")

        const tap = listener.bind(egress.defaultRegion)
        const page = yield* viaProxy(listener.path, `${traffic.http}/bytes?n=123456`)
        assert.strictEqual(page.status, 200)
        assert.strictEqual(page.body.length, 123_456)
        const tunnelled = yield* tunnel(listener.path, new URL(traffic.http).host, "/bytes?n=54321")
        assert.include(tunnelled.status, "200")
        assert.isAtLeast(tunnelled.bytes, 54_321)
        // The server's sockets count the last bytes as they read them: poll until both sides agree.
        const agreed = yield* Effect.gen(function* () {
          for (let i = 0; i < 100; i++) {
            const wire = traffic.counts()
            const counted = tap.counters()
            if (counted.bytesUp === wire.bytesIn && counted.bytesDown === wire.bytesOut) return true
            yield* Effect.sleep("10 millis")
          }
          return false
        })
        const wire = traffic.counts()
        assert.isTrue(agreed, `counted ${JSON.stringify(tap.counters())}, wire ${JSON.stringify(wire)}`)
        assert.strictEqual(tap.proxyIp(), "127.0.0.1")

        const refused = yield* viaProxy(listener.path, "http://10.0.0.1/")
        assert.strictEqual(refused.status, 403)
        assert.include(refused.body, "10.0.0.1 is a private address")
        const own = yield* viaProxy(listener.path, "http://127.0.0.1:8080/")
        assert.include(own.body, "one of the service's own ports", "the proxy never reaches the service")
        // The self-test's question, which the guard refuses whatever the allow-list says.
        const probe = yield* Effect.promise(() => tap.probe())
        assert.isTrue(probe.ok, probe.detail)
      }).pipe(Effect.scoped, Effect.provide(proxiesAllowing("127.0.0.1/32")))
  )

  it.live(
    "a name is resolved once: the request goes on to the checked address, to an upstream proxy too",
    () =>
      Effect.gen(function* () {
        const traffic = yield* TrafficServer.serve("127.0.0.1")
        const seen: Array<string> = []
        const upstream = yield* Effect.acquireRelease(
          Effect.promise(async () => {
            const server = new ProxyChain.Server({
              port: 0,
              host: "127.0.0.1",
              prepareRequestFunction: ({ hostname, username, password }) => {
                seen.push(hostname)
                return { requestAuthentication: username !== "u" || password !== "p" }
              }
            })
            await server.listen()
            return server
          }),
          (server) => Effect.promise(() => server.close(true))
        )
        const proxies = yield* EgressProxies
        const egress = yield* Egress
        const chained = yield* proxies.listen(yield* socketPath)
        chained.bind({
          name: "up",
          kind: "upstream",
          url: Redacted.make(`http://u:p@127.0.0.1:${upstream.port}`),
          publicAddress: "192.0.2.1"
        })
        const byName = `http://localhost:${traffic.port}`
        const plain = yield* viaProxy(chained.path, `${byName}/bytes?n=100`)
        assert.strictEqual(plain.status, 200)
        const tunnelled = yield* tunnel(chained.path, `localhost:${traffic.port}`, "/bytes?n=100")
        assert.include(tunnelled.status, "200")
        assert.deepStrictEqual(
          seen,
          ["127.0.0.1", "127.0.0.1"],
          "the upstream never sees the name to resolve again"
        )

        const direct = yield* proxies.listen(yield* socketPath)
        direct.bind(egress.defaultRegion)
        const viaName = yield* viaProxy(direct.path, `${byName}/bytes?n=100`)
        assert.strictEqual(viaName.status, 200, "names still work, to the checked address")
      }).pipe(Effect.scoped, Effect.provide(proxiesAllowing("127.0.0.1/32,::1/128")))
  )
})
