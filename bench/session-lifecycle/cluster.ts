// The session lifecycle on a local cluster of three nodes beside one node, in
// the same run: clients spread across the nodes (so most connect through a
// node that does not run their session), sessions per second, create-to-ready
// and the node hop's cost per CDP round trip. See bench/README.md.
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import { type Client, measureWarm, median, open } from "../cdp-relay/Measure.ts"
import * as Prettier from "prettier"
import { CHURN_DRAIN_SECONDS, CHURN_SETTINGS, type ChurnWindow, churnWindow } from "./Churn.ts"
import { type BenchCluster, startCluster } from "./LocalCluster.ts"
import { SERVICE_PHASES, type Sample, type ServicePhase, serviceIteration } from "./Lifecycle.ts"
import { serveLocalPage } from "./LocalPage.ts"
import { type Stats, stats } from "./Report.ts"
import { call, intFromEnv, json, signUp, sleep } from "./TargetService.ts"

const NODES = intFromEnv("BENCH_CLUSTER_NODES", 3)
const CLIENTS = intFromEnv("BENCH_CONCURRENCY", 6)
const PER_CLIENT = intFromEnv("BENCH_CONCURRENT_ITERATIONS", 4)
/** Warm browsers in all: the one node keeps them all, each of the cluster's nodes its share. */
const POOL = intFromEnv("BROWSER_POOL_SIZE", 3)
const resultFile = new URL("./last-cluster-run.json", import.meta.url)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

interface SetupResult {
  readonly nodes: number
  readonly sessions: number
  readonly wallMs: number
  readonly sessionsPerSecond: number
  readonly phases: Record<ServicePhase, Stats>
  /** Sessions whose client reached them through a node that did not run them. */
  readonly throughOtherNode: number
  /** Sessions each node ran. */
  readonly perNode: Record<string, number>
}

/** `CLIENTS` loops at once, client i on node i mod n for REST and CDP, `PER_CLIENT` sessions each. */
const runClients = async (cluster: BenchCluster, key: string, pageUrl: string): Promise<SetupResult> => {
  const samples: Array<Sample<ServicePhase>> = []
  const through = new Map<string, string>()
  const start = performance.now()
  const loops = Array.from({ length: CLIENTS }, async (_, client) => {
    const baseUrl = cluster.nodes[client % cluster.nodes.length]!
    for (let i = 0; i < PER_CLIENT; i++)
      samples.push(
        await serviceIteration({ baseUrl, key, pageUrl, onCreated: (id) => through.set(id, baseUrl) })
      )
  })
  const settled = await Promise.allSettled(loops)
  const wallMs = performance.now() - start
  const failure = settled.find((result) => result.status === "rejected")
  if (failure !== undefined) throw failure.reason
  const owners = await cluster.ownersOf([...through.keys()])
  const perNode: Record<string, number> = {}
  let throughOtherNode = 0
  for (const [id, baseUrl] of through) {
    const owner = owners.get(id) ?? "unknown"
    perNode[owner] = (perNode[owner] ?? 0) + 1
    if (owner !== baseUrl) throughOtherNode++
  }
  return {
    nodes: cluster.nodes.length,
    sessions: samples.length,
    wallMs,
    sessionsPerSecond: samples.length / (wallMs / 1000),
    phases: Object.fromEntries(
      SERVICE_PHASES.map((phase) => [phase, stats(samples.map((s) => s[phase]))])
    ) as Record<ServicePhase, Stats>,
    throughOtherNode,
    perNode
  }
}

/** CDP round trips to one session through its node and through another, interleaved. */
const measureHop = async (cluster: BenchCluster, key: string) => {
  const created = await call(cluster.nodes[0]!, "POST", "/v1/sessions", { key, body: {} })
  const session: { id: string } = json(created.bytes)
  while (
    json((await call(cluster.nodes[0]!, "GET", `/v1/sessions/${session.id}`, { key })).bytes).status !==
    "ready"
  )
    await sleep(10)
  const owner = (await cluster.ownersOf([session.id])).get(session.id)!
  const other = cluster.nodes.find((node) => node !== owner)!
  const auth = { authorization: `Bearer ${key}` }
  const cdp = (node: string) => `${node.replace("http://", "ws://")}/sessions/${session.id}`
  const clients: Record<"owner" | "hop", Client> = {
    owner: await open(cdp(owner), auth),
    hop: await open(cdp(other), auth)
  }
  const { single, flights } = await measureWarm(["owner", "hop"] as const, clients, 1)
  await call(cluster.nodes[0]!, "DELETE", `/v1/sessions/${session.id}`, { key })
  return {
    ownerP50: median(single.owner),
    hopP50: median(single.hop),
    ownerInFlight: median(flights.owner),
    hopInFlight: median(flights.hop)
  }
}

const setup = async (nodes: number, pageUrl: string) => {
  const env = {
    BROWSER_POOL_SIZE: String(Math.max(1, Math.round(POOL / nodes))),
    LIMIT_SESSION_CREATES_PER_MINUTE: "100000",
    LIMIT_CONCURRENT_SESSIONS: "1000"
  }
  log(`${nodes} node(s): starting (pool ${env.BROWSER_POOL_SIZE} each)`)
  const cluster = await startCluster(nodes, env)
  try {
    const key = await signUp(cluster.nodes[0]!)
    log(`${nodes} node(s): warm-up, one session through each node (not counted)`)
    for (const baseUrl of cluster.nodes) await serviceIteration({ baseUrl, key, pageUrl })
    log(`${nodes} node(s): ${CLIENTS} clients x ${PER_CLIENT} sessions`)
    const run = await runClients(cluster, key, pageUrl)
    const hop = nodes > 1 ? await measureHop(cluster, key) : undefined
    return { run, hop }
  } finally {
    await cluster.stop()
  }
}

/** The open-loop lifecycle on two nodes, without churn and then while a node joins and another drains. */
const churnRun = async (pageUrl: string) => {
  const env = {
    BROWSER_POOL_SIZE: "2",
    LIMIT_SESSION_CREATES_PER_MINUTE: "100000",
    LIMIT_CONCURRENT_SESSIONS: "1000",
    DRAIN_SECONDS: String(CHURN_DRAIN_SECONDS)
  }
  log("churn: 2 nodes starting")
  const cluster = await startCluster(2, env)
  try {
    const key = await signUp(cluster.nodes[0]!)
    for (const baseUrl of cluster.nodes) await serviceIteration({ baseUrl, key, pageUrl })
    log(`churn: ${CHURN_SETTINGS.seconds} s of arrivals without churn`)
    const steady = await churnWindow(cluster, key, pageUrl, false, log)
    log(`churn: ${CHURN_SETTINGS.seconds} s of arrivals while a node joins and another drains`)
    const churned = await churnWindow(cluster, key, pageUrl, true, log)
    return { steady, churned }
  } finally {
    await cluster.stop()
  }
}

const MODES = (process.env.BENCH_CLUSTER_MODES ?? "scale,churn").split(",").map((mode) => mode.trim())
const churnLines = (churn: { steady: ChurnWindow; churned: ChurnWindow }) => {
  const row = (label: string, w: ChurnWindow) =>
    `${label.padEnd(12)} ${String(w.sessions).padStart(8)} ${w.ready.p50.toFixed(0).padStart(9)} ${w.ready.p95.toFixed(0).padStart(9)} ${String(w.endedByChurn).padStart(15)}   ${Object.entries(
      w.ends
    )
      .map(([end, n]) => `${end} ${n}`)
      .join(", ")}`
  const c = churn.churned
  return [
    `node churn: one session every ${CHURN_SETTINGS.intervalMs} ms for ${CHURN_SETTINGS.seconds} s, each held ${CHURN_SETTINGS.holdMs} ms with puppeteer connected; DRAIN_SECONDS ${CHURN_DRAIN_SECONDS}`,
    `${"".padEnd(12)} ${"sessions".padStart(8)} ${"ready p50".padStart(9)} ${"ready p95".padStart(9)} ${"ended by churn".padStart(15)}   ends`,
    row("no churn", churn.steady),
    row("churn", c),
    `churn: the third node ready ${c.joinReadyAtSeconds?.toFixed(1)} s in; the drained node exited ${c.drainSeconds?.toFixed(1)} s after its SIGTERM; ready p95 ${(c.ready.p95 / churn.steady.ready.p95).toFixed(2)}x without churn (target: 0 ended by churn)`,
    ""
  ]
}

const page = await serveLocalPage()
try {
  const results: Record<string, unknown> = {
    finishedAt: new Date().toISOString(),
    machine: { cpus: Os.cpus().length, node: process.version }
  }
  const lines: Array<string> = [""]
  if (MODES.includes("scale")) {
    const one = await setup(1, page.url)
    const many = await setup(NODES, page.url)
    const line = (label: string, r: SetupResult) =>
      `${label.padEnd(10)} ${r.sessionsPerSecond.toFixed(2).padStart(10)} ${r.phases.ready.p50.toFixed(0).padStart(9)} ${r.phases.ready.p95.toFixed(0).padStart(9)} ${r.phases.connect.p50.toFixed(0).padStart(11)} ${r.phases.total.p50.toFixed(0).padStart(9)}   ${r.throughOtherNode}/${r.sessions}`
    const hop = many.hop!
    lines.push(
      `session lifecycle, ${CLIENTS} clients x ${PER_CLIENT} sessions, client i on node i mod n; ${Os.cpus().length} CPUs, node ${process.version}`,
      `${"".padEnd(10)} ${"sessions/s".padStart(10)} ${"ready p50".padStart(9)} ${"ready p95".padStart(9)} ${"connect p50".padStart(11)} ${"total p50".padStart(9)}   via another node`,
      line("1 node", one.run),
      line(`${NODES} nodes`, many.run),
      `${NODES} nodes / 1 node: sessions/s ${(many.run.sessionsPerSecond / one.run.sessionsPerSecond).toFixed(2)}x, ready p50 ${(many.run.phases.ready.p50 / one.run.phases.ready.p50).toFixed(2)}x`,
      `sessions per node: ${Object.entries(many.run.perNode)
        .map(([node, count]) => `${node} ${count}`)
        .join(", ")}`,
      `CDP round trip, one at a time p50: owner ${hop.ownerP50.toFixed(2)} ms, through another node ${hop.hopP50.toFixed(2)} ms (+${(hop.hopP50 - hop.ownerP50).toFixed(2)} ms); 1000 in flight, mean: ${hop.ownerInFlight.toFixed(1)} / ${hop.hopInFlight.toFixed(1)} ms`,
      ""
    )
    Object.assign(results, {
      counts: { nodes: NODES, clients: CLIENTS, perClient: PER_CLIENT, pool: POOL },
      oneNode: one.run,
      cluster: many.run,
      hop
    })
  }
  if (MODES.includes("churn")) {
    const churn = await churnRun(page.url)
    lines.push(...churnLines(churn))
    Object.assign(results, { churn: { settings: CHURN_SETTINGS, ...churn } })
  }
  console.log(lines.join("\n"))
  // Modes not run this time keep their last figures.
  const previous = JSON.parse(await Fs.readFile(resultFile, "utf8").catch(() => "{}")) as Record<
    string,
    unknown
  >
  await Fs.writeFile(
    resultFile,
    await Prettier.format(JSON.stringify({ ...previous, ...results }), {
      ...(await Prettier.resolveConfig(resultFile.pathname)),
      parser: "json"
    })
  )
  log(`results written to ${resultFile.pathname}`)
} finally {
  await page.close()
}
