// The open-loop session lifecycle on a two-node cluster, once as it is and
// once while a third node joins and one of the first two drains (SIGTERM):
// what node churn costs the clients. See bench/README.md.
import * as Util from "node:util"
import puppeteer from "puppeteer-core"
import { runArrivals } from "./Arrivals.ts"
import { type BenchCluster, LOG_FILE } from "./LocalCluster.ts"
import { type Stats, stats } from "./Report.ts"
import { call, createSession, intFromEnv, json, sleep, waitForReady } from "./TargetService.ts"

const SECONDS = intFromEnv("BENCH_CHURN_SECONDS", 60)
const INTERVAL_MS = intFromEnv("BENCH_CHURN_INTERVAL_MS", 1000)
const HOLD_MS = intFromEnv("BENCH_CHURN_HOLD_MS", 5000)
/** The nodes' drain: far above a session's life here, so a drain ends when its last session does. */
export const CHURN_DRAIN_SECONDS = 120

export interface ChurnWindow {
  readonly sessions: number
  /** Lifecycles that failed (a create refused, a session that never got ready, a client cut off). */
  readonly failed: number
  readonly ready: Stats
  /** Every session's end, `status/ended_reason`, counted. */
  readonly ends: Record<string, number>
  /** Sessions the churn ended: any end other than the client's delete, and every failed lifecycle. */
  readonly endedByChurn: number
  /** The churn window only: when the third node was ready, and how long the drain took. */
  readonly joinReadyAtSeconds?: number
  readonly drainSeconds?: number
}

/**
 * What a load balancer does: each new client goes to a node whose `/readyz`
 * answers 200 (looked at every 250 ms), and stays with it for its session.
 */
const balancer = (initial: ReadonlyArray<string>) => {
  const nodes = [...initial]
  let ready = [...initial]
  let stopped = false
  const loop = (async () => {
    while (!stopped) {
      const answers = await Promise.all(
        nodes.map((node) =>
          fetch(`${node}/readyz`, { signal: AbortSignal.timeout(1000) }).then(
            (response) => response.status === 200,
            () => false
          )
        )
      )
      ready = nodes.filter((_, i) => answers[i])
      await sleep(250)
    }
  })()
  return {
    add: (node: string) => void nodes.push(node),
    pick: () => ready[Math.floor(Math.random() * ready.length)] ?? nodes[0]!,
    stop: async () => {
      stopped = true
      await loop
    }
  }
}

/**
 * One client: create, ready, connect with puppeteer, load a page, hold,
 * disconnect, delete. Each request goes where the balancer sends it, as does
 * the CDP connection, which then stays on that node (as a load balancer keeps
 * a WebSocket on the node it chose).
 */
const lifecycle = (pick: () => string, key: string, pageUrl: string, ids: Array<string>) => async () => {
  const t0 = performance.now()
  const created = await createSession(pick(), key)
  if (created.status !== 201) throw new Error(`create: HTTP ${created.status}`)
  const session: { id: string } = json(created.bytes)
  ids.push(session.id)
  await waitForReady(pick(), key, session.id)
  const ready = performance.now() - t0
  const via = pick()
  const browser = await puppeteer
    .connect({
      browserWSEndpoint: `${via.replace("http://", "ws://")}/sessions/${session.id}`,
      headers: { Authorization: `Bearer ${key}` },
      defaultViewport: null
    })
    .catch((error) => {
      throw new Error(`session ${session.id}: connect through ${via}: ${Util.inspect(error, { depth: 1 })}`)
    })
  let cut = false
  browser.on("disconnected", () => (cut = true))
  const page = (await browser.pages())[0] ?? (await browser.newPage())
  await page.goto(pageUrl)
  await sleep(HOLD_MS)
  if (cut) throw new Error(`session ${session.id}: the client's connection through ${via} was cut`)
  await page.title()
  await browser.disconnect()
  const removed = await call(pick(), "DELETE", `/v1/sessions/${session.id}`, { key })
  if (removed.status !== 204) throw new Error(`delete: HTTP ${removed.status}`)
  return { ready }
}

/**
 * `SECONDS` of arrivals, one every `INTERVAL_MS`, each on the node the
 * balancer picks. With `churn`, a third node joins a quarter in and the
 * second node drains half way.
 */
export const churnWindow = async (
  cluster: BenchCluster,
  key: string,
  pageUrl: string,
  churn: boolean,
  log: (message: string) => void
): Promise<ChurnWindow> => {
  const lb = balancer(cluster.nodes)
  const ids: Array<string> = []
  const readies: Array<number> = []
  let failed = 0
  const started = performance.now()
  const events: Array<Promise<void>> = []
  let joinReadyAtSeconds: number | undefined
  let drainSeconds: number | undefined
  if (churn) {
    events.push(
      sleep((SECONDS * 1000) / 4).then(async () => {
        log("churn: a third node joins")
        lb.add(await cluster.join({ DRAIN_SECONDS: String(CHURN_DRAIN_SECONDS) }))
        joinReadyAtSeconds = (performance.now() - started) / 1000
        log(`churn: the third node is ready at ${joinReadyAtSeconds.toFixed(1)} s`)
      }),
      sleep((SECONDS * 1000) / 2).then(async () => {
        log(`churn: ${cluster.nodes[1]} drains (SIGTERM)`)
        drainSeconds = await cluster.drain(cluster.nodes[1]!)
        log(`churn: it drained and exited in ${drainSeconds.toFixed(1)} s`)
      })
    )
  }
  const failedIds = new Set<string>()
  await runArrivals(Math.round((SECONDS * 1000) / INTERVAL_MS), INTERVAL_MS, async () => {
    const mine: Array<string> = []
    const sample = await lifecycle(lb.pick, key, pageUrl, mine)().catch(async (error) => {
      failed++
      log(
        `lifecycle failed (the nodes' warnings: ${LOG_FILE}): ${error instanceof Error ? error.message : Util.inspect(error, { depth: 2 })}`
      )
      for (const id of mine) {
        failedIds.add(id)
        await call(lb.pick(), "DELETE", `/v1/sessions/${id}`, { key }).catch(() => undefined)
      }
      return undefined
    })
    ids.push(...mine)
    if (sample !== undefined) readies.push(sample.ready)
    return { total: 0 }
  })
  await Promise.all(events)
  await lb.stop()
  const ends = Object.fromEntries(await cluster.endsOf(ids))
  const cut = ids.filter((id) => !failedIds.has(id))
  const endsOfKept = cut.length === 0 ? new Map<string, number>() : await cluster.endsOf(cut)
  // Each failed lifecycle once, and each other session that did not end by its client's delete.
  const endedByChurn =
    failed + [...endsOfKept].reduce((sum, [end, n]) => sum + (end === "closed/client_delete" ? 0 : n), 0)
  return {
    sessions: ids.length,
    failed,
    ready: stats(readies),
    ends,
    endedByChurn,
    ...(joinReadyAtSeconds === undefined ? {} : { joinReadyAtSeconds }),
    ...(drainSeconds === undefined ? {} : { drainSeconds })
  }
}

export const CHURN_SETTINGS = { seconds: SECONDS, intervalMs: INTERVAL_MS, holdMs: HOLD_MS }
