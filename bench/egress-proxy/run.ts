// Throughput and added latency of the per-session egress proxy, beside the
// same requests made directly, in one run. The proxy runs here, as in the
// service; the destination and the client are processes of their own, as the
// remote site and the browser are. See bench/README.md.
import { Effect, Exit, Layer, Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import { availableParallelism } from "node:os"
import * as Path from "node:path"
import { ServiceConfig } from "../../src/platform/config/Config.ts"
import { AdHosts } from "../../src/platform/net/AdHosts.ts"
import { Egress } from "../../src/platform/net/Egress.ts"
import { EgressProxies } from "../../src/runtimes/shared/EgressProxy.ts"
import { LocalPorts } from "../../src/platform/net/LocalPorts.ts"

const intFromEnv = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback)
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`)
  return value
}

const LARGE_MB = intFromEnv("BENCH_LARGE_MB", 200)
const SMALL_REQUESTS = intFromEnv("BENCH_SMALL_REQUESTS", 500)
const ROUNDS = intFromEnv("BENCH_ROUNDS", 5)
// A fast server link: 1 Gbit/s is about 119 MiB/s.
const LINK_MBPS = intFromEnv("BENCH_LINK_MBPS", 119)
const here = new URL(".", import.meta.url).pathname

const run = (script: string, args: ReadonlyArray<string>) =>
  spawn(process.execPath, [`${here}${script}`, ...args], { stdio: ["ignore", "pipe", "inherit"] })

const firstLine = (child: ChildProcess) =>
  new Promise<string>((resolve) =>
    child.stdout!.once("data", (data: Buffer) => resolve(data.toString().trim()))
  )

const output = (child: ChildProcess) =>
  new Promise<string>((resolve, reject) => {
    let text = ""
    child.stdout!.on("data", (data: Buffer) => (text += data))
    child.once("exit", (code) => (code === 0 ? resolve(text) : reject(new Error(`client exited ${code}`))))
  })

const origin = run("origin.ts", [])
// However this process ends, the origin ends with it.
process.on("exit", () => origin.kill("SIGTERM"))
const originPort = Number(await firstLine(origin))

// The service's own proxy, bound to a direct region, loopback allowed for the bench. It listens on a
// Unix socket, as every runtime's does (a browser's cell forwards its loopback port there).
const socketDir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-egress-bench-"))
process.on("exit", () => FsSync.rmSync(socketDir, { recursive: true, force: true }))
const scope = Effect.runSync(Scope.make())
const proxy = await Effect.runPromise(
  Effect.gen(function* () {
    const proxies = yield* EgressProxies
    const egress = yield* Egress
    const listener = yield* proxies.listen(Path.join(socketDir, "egress.sock"))
    return { path: listener.path, tap: listener.bind(egress.defaultRegion) }
  }).pipe(
    Effect.provide(
      EgressProxies.layerNoDeps.pipe(
        Layer.provideMerge(Egress.layer),
        Layer.provideMerge(AdHosts.layer),
        Layer.provideMerge(LocalPorts.layer),
        Layer.provide(ServiceConfig.layer({ egressAllowCidrs: "127.0.0.1/32", logLevel: "Warn" }))
      )
    ),
    Scope.provide(scope)
  )
)

process.stderr.write(
  `[bench] ${LARGE_MB} MB downloads and ${SMALL_REQUESTS} small requests, ${ROUNDS} rounds, direct and proxied alternating\n`
)
type Series =
  | "httpDirect"
  | "httpProxy"
  | "rawDirect"
  | "rawTunnel"
  | "linkDirect"
  | "linkTunnel"
  | "smallDirect"
  | "smallProxy"
const samples = JSON.parse(
  await output(
    run("client.ts", [originPort, proxy.path, LARGE_MB, SMALL_REQUESTS, ROUNDS, LINK_MBPS].map(String))
  )
) as Record<Series, Array<number>>
origin.kill("SIGTERM")
const counted = proxy.tap.counters()
await Effect.runPromise(Scope.close(scope, Exit.void))

const median = (values: ReadonlyArray<number>) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const mbps = (seconds: ReadonlyArray<number>) => (LARGE_MB * 1024 * 1024) / 1e6 / median(seconds)
const pair = (direct: Series, proxied: Series) => ({
  direct: mbps(samples[direct]),
  proxy: mbps(samples[proxied])
})
const rows = [
  [
    `${LARGE_MB} MB, CONNECT tunnel (HTTPS, WebSockets), origin at a ${LINK_MBPS} MiB/s link`,
    pair("linkDirect", "linkTunnel")
  ],
  [`${LARGE_MB} MB, CONNECT tunnel, unpaced loopback`, pair("rawDirect", "rawTunnel")],
  [`${LARGE_MB} MB, plain HTTP, unpaced loopback`, pair("httpDirect", "httpProxy")]
] as const
const smallMs = { direct: median(samples.smallDirect), proxy: median(samples.smallProxy) }
const added = smallMs.proxy - smallMs.direct
const loss = (row: { readonly direct: number; readonly proxy: number }) => 1 - row.proxy / row.direct

console.log(
  `\n## Egress proxy: ${LARGE_MB} MB downloads, ${SMALL_REQUESTS} small requests, median of ${ROUNDS} rounds\n`
)
console.log("| measure | direct | through the proxy | proxied / direct |")
console.log("| --- | --- | --- | --- |")
for (const [label, row] of rows) {
  console.log(
    `| ${label} (MB/s) | ${row.direct.toFixed(0)} | ${row.proxy.toFixed(0)} | ${(row.proxy / row.direct).toFixed(2)}x |`
  )
}
console.log(
  `| small GET on a keep-alive connection (ms) | ${smallMs.direct.toFixed(3)} | ${smallMs.proxy.toFixed(3)} | +${added.toFixed(3)} ms |`
)
const linkLoss = loss(rows[0][1])
console.log(
  `\nTargets: under 10% throughput loss on large transfers at link speed: ${(linkLoss * 100).toFixed(1)}% (${linkLoss < 0.1 ? "met" : "NOT met"}); under 1 ms added per small request: ${added.toFixed(3)} ms (${added < 1 ? "met" : "NOT met"}).`
)
console.log(
  `Unpaced on loopback the client, the origin and the proxy share this machine's ${availableParallelism()} cores, so the proxy's copy takes CPU from both ends: ${(loss(rows[1][1]) * 100).toFixed(0)}% (tunnel) and ${(loss(rows[2][1]) * 100).toFixed(0)}% (plain HTTP) less; its own ceiling there is ${rows[1][1].proxy.toFixed(0)} MB/s per session.`
)
console.log(`Metered on the wire meanwhile: ${counted.bytesDown} bytes down, ${counted.bytesUp} up.`)
await Fs.writeFile(
  new URL("./last-run.json", import.meta.url),
  JSON.stringify(
    {
      largeMb: LARGE_MB,
      smallRequests: SMALL_REQUESTS,
      rounds: ROUNDS,
      linkMBps: LINK_MBPS,
      samples,
      counted
    },
    null,
    2
  )
)
