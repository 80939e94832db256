// Webhook delivery: events per second and the latency from an event's commit
// to a local receiver's 200, on one node and on three (`npm run cluster`), in
// the same run. See bench/README.md.
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Os from "node:os"
import { startCluster } from "../session-lifecycle/LocalCluster.ts"
import { stats } from "../session-lifecycle/Report.ts"
import { call, json, sleep } from "../session-lifecycle/TargetService.ts"

const EVENTS = Number(process.env.BENCH_EVENTS ?? 300)
const CLIENTS = Number(process.env.BENCH_CONCURRENCY ?? 8)
/** The paced run: events a second, one at a time, below what the machine saturates at. */
const RATE = Number(process.env.BENCH_RATE ?? 20)
const PACED_SECONDS = Number(process.env.BENCH_PACED_SECONDS ?? 10)
const resultFile = new URL("./last-run.json", import.meta.url)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

/** The receiver: answers 200 at once and notes when each event arrived. */
const arrivals = new Map<string, { readonly at: number; readonly createdAt: number }>()
const receiver = Http.createServer((request, response) => {
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.on("end", () => {
    const at = Date.now()
    const event = JSON.parse(Buffer.concat(chunks).toString("utf8"))
    if (!arrivals.has(event.id)) arrivals.set(event.id, { at, createdAt: Date.parse(event.created_at) })
    response.writeHead(200).end()
  })
})
await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`

/** A person's dashboard cookie: keys are made with it. */
const logIn = async (baseUrl: string) => {
  const email = `bench-${Crypto.randomBytes(6).toString("hex")}@example.com`
  const password = "bench-password-1234"
  await call(baseUrl, "POST", "/auth/register", { body: { email, password } })
  const login = await call(baseUrl, "POST", "/auth/login", { body: { email, password } })
  const cookie = login.headers
    .getSetCookie()
    .map((header) => header.split(";")[0]!)
    .find((pair) => pair.startsWith("service_session="))
  if (cookie === undefined) throw new Error("login: no cookie")
  return cookie
}

/** `count` events (`key.created`, one per new API key), from `CLIENTS` clients spread over the nodes. */
const produce = async (nodes: ReadonlyArray<string>, cookie: string, count: number) => {
  let next = 0
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      const node = nodes[client % nodes.length]!
      while (next < count) {
        next++
        const created = await call(node, "POST", "/v1/keys", { cookie, body: { name: "bench" } })
        if (created.status !== 201) throw new Error(`key: HTTP ${created.status}`)
      }
    })
  )
}

/** One event every 1/RATE s, each from its own request, for PACED_SECONDS. */
const producePaced = async (nodes: ReadonlyArray<string>, cookie: string) => {
  const count = RATE * PACED_SECONDS
  const start = performance.now()
  const requests: Array<Promise<unknown>> = []
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1000) / RATE
    await sleep(Math.max(0, due - performance.now()))
    requests.push(call(nodes[i % nodes.length]!, "POST", "/v1/keys", { cookie, body: { name: "paced" } }))
  }
  await Promise.all(requests)
  return count
}

const waitForArrivals = async (count: number) => {
  const deadline = Date.now() + 120_000
  while (arrivals.size < count) {
    if (Date.now() > deadline) throw new Error(`${arrivals.size} of ${count} events arrived`)
    await sleep(20)
  }
}

const run = async (nodeCount: number) => {
  log(`${nodeCount} node(s): starting`)
  const cluster = await startCluster(nodeCount, {
    BROWSER_POOL_SIZE: "0",
    WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32",
    LIMIT_SESSION_CREATES_PER_MINUTE: "100000"
  })
  try {
    const cookie = await logIn(cluster.nodes[0]!)
    const hook = await call(cluster.nodes[0]!, "POST", "/v1/webhooks", {
      cookie,
      body: { url: receiverUrl, events: ["key.created"] }
    })
    if (hook.status !== 201) throw new Error(`webhook: HTTP ${hook.status}: ${json(hook.bytes)}`)
    // A warm-up.
    arrivals.clear()
    await produce(cluster.nodes, cookie, 30)
    await waitForArrivals(30)
    arrivals.clear()
    log(`${nodeCount} node(s): ${EVENTS} events from ${CLIENTS} clients`)
    const started = Date.now()
    await produce(cluster.nodes, cookie, EVENTS)
    await waitForArrivals(EVENTS)
    const all = [...arrivals.values()]
    const latencies = all.map((each) => each.at - each.createdAt)
    const last = Math.max(...all.map((each) => each.at))
    arrivals.clear()
    log(`${nodeCount} node(s): paced, ${RATE} events a second for ${PACED_SECONDS} s`)
    const paced = await producePaced(cluster.nodes, cookie)
    await waitForArrivals(paced)
    const pacedLatencies = [...arrivals.values()].map((each) => each.at - each.createdAt)
    return {
      nodes: nodeCount,
      events: EVENTS,
      eventsPerSecond: EVENTS / ((last - started) / 1000),
      latencyMs: stats(latencies),
      pacedLatencyMs: stats(pacedLatencies)
    }
  } finally {
    await cluster.stop()
  }
}

try {
  const one = await run(1)
  const three = await run(3)
  const line = (r: typeof one) =>
    `${`${r.nodes} node${r.nodes > 1 ? "s" : ""}`.padEnd(8)} ${r.eventsPerSecond.toFixed(1).padStart(10)} ${r.latencyMs.p50.toFixed(1).padStart(12)} ${r.latencyMs.p95.toFixed(1).padStart(12)} ${r.pacedLatencyMs.p50.toFixed(1).padStart(12)} ${r.pacedLatencyMs.p95.toFixed(1).padStart(12)}`
  console.log(
    [
      "",
      `webhook delivery, ${EVENTS} key.created events from ${CLIENTS} clients; ${Os.cpus().length} CPUs, node ${process.version}`,
      `saturated: as fast as ${CLIENTS} clients make them; paced: ${RATE} a second, commit to the receiver's 200`,
      `${"".padEnd(8)} ${"events/s".padStart(10)} ${"sat. p50 ms".padStart(12)} ${"sat. p95 ms".padStart(12)} ${"paced p50 ms".padStart(12)} ${"paced p95 ms".padStart(12)}`,
      line(one),
      line(three),
      ""
    ].join("\n")
  )
  await Fs.writeFile(
    resultFile,
    `${JSON.stringify({ finishedAt: new Date().toISOString(), cpus: Os.cpus().length, one, three }, null, 2)}\n`
  )
  log(`results written to ${resultFile.pathname}`)
} finally {
  receiver.close()
}
