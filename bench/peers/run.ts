// The comparison a user makes: one lifecycle (get a browser, its first page,
// goto a local page, screenshot over CDP, end) against a direct
// puppeteer.launch, our browser sessions, our context sessions, and any
// CDP-over-WebSocket service given by URL (Browserless, started locally as
// bench/peers/BROWSERLESS.md says), in one run on one machine.
//
//   npm run bench:peers
//   BENCH_PEERS="browserless=ws://127.0.0.1:3100?token=bench-token" npm run bench:peers
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import puppeteer, { type Browser } from "puppeteer-core"
import { launchDirect, runConcurrent, runSequential, type Sample } from "../session-lifecycle/Lifecycle.ts"
import { serveLocalPage } from "../session-lifecycle/LocalPage.ts"
import { stats, type Stats } from "../session-lifecycle/Report.ts"
import {
  call,
  createSession,
  intFromEnv,
  json,
  type SessionIsolation,
  signUp,
  startInProcess,
  type TargetService,
  waitForReady,
  waitForService
} from "../session-lifecycle/TargetService.ts"

const ITERATIONS = intFromEnv("BENCH_ITERATIONS", 20)
const CONCURRENCY = intFromEnv("BENCH_CONCURRENCY", 5)
const CONCURRENT_ITERATIONS = intFromEnv("BENCH_CONCURRENT_ITERATIONS", 4)
const VIEWPORT = { width: 1280, height: 720 }

const PHASES = ["start", "goto", "screenshot", "end", "total"] as const
type Phase = (typeof PHASES)[number]

const log = (message: string) => process.stderr.write(`[peers] ${message}\n`)

/** `name=ws://...` pairs, comma separated. */
const peers = (process.env.BENCH_PEERS ?? "")
  .split(",")
  .map((entry) => entry.trim())
  .filter((entry) => entry !== "")
  .map((entry) => {
    const at = entry.indexOf("=")
    if (at <= 0) throw new Error(`BENCH_PEERS: expected name=ws://host:port/..., got ${entry}`)
    const url = entry.slice(at + 1)
    if (!/^wss?:\/\//.test(url)) throw new Error(`BENCH_PEERS: ${entry.slice(0, at)} is not a ws:// URL`)
    return { name: entry.slice(0, at), url }
  })

/** A browser in hand, and how to be done with it. */
interface Started {
  readonly browser: Browser
  readonly end: () => Promise<void>
}

/** The same work whatever gave the browser: first page, goto, a PNG over CDP, end. */
const lifecycle = (start: () => Promise<Started>, pageUrl: string) => async (): Promise<Sample<Phase>> => {
  const t0 = performance.now()
  const { browser, end } = await start()
  let ended = false
  try {
    const page = (await browser.pages())[0] ?? (await browser.newPage())
    const t1 = performance.now()
    await page.goto(pageUrl)
    const t2 = performance.now()
    const shot = await page.screenshot()
    const t3 = performance.now()
    if (shot.length < 8 || shot[0] !== 0x89 || shot[1] !== 0x50)
      throw new Error("the screenshot is not a PNG")
    ended = true
    await end()
    const t4 = performance.now()
    return { start: t1 - t0, goto: t2 - t1, screenshot: t3 - t2, end: t4 - t3, total: t4 - t0 }
  } finally {
    if (!ended) await end().catch(() => {})
  }
}

const direct = async (): Promise<Started> => {
  const browser = await launchDirect()
  return { browser, end: () => browser.close() }
}

/** Ours: create, wait for ready, connect; end is disconnect and DELETE, as a client of ours does it. */
const ours = (baseUrl: string, key: string, kind: SessionIsolation) => async (): Promise<Started> => {
  const created = await createSession(baseUrl, key, kind)
  if (created.status !== 201) throw new Error(`create: HTTP ${created.status}`)
  const session: { id: string; cdp_url: string } = json(created.bytes)
  const remove = () => call(baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key })
  try {
    await waitForReady(baseUrl, key, session.id)
    const browser = await puppeteer.connect({
      browserWSEndpoint: session.cdp_url,
      headers: { Authorization: `Bearer ${key}` },
      defaultViewport: VIEWPORT
    })
    return {
      browser,
      end: async () => {
        await browser.disconnect()
        const removed = await remove()
        if (removed.status !== 204) throw new Error(`delete: HTTP ${removed.status}`)
      }
    }
  } catch (error) {
    await remove().catch(() => {})
    throw error
  }
}

/** A CDP-over-WebSocket service: the connect is the create, closing the browser ends it. */
const peer = (url: string) => async (): Promise<Started> => {
  const browser = await puppeteer.connect({ browserWSEndpoint: url, defaultViewport: VIEWPORT })
  return { browser, end: () => browser.close() }
}

interface Row {
  readonly name: string
  readonly sequential: Readonly<Record<Phase, Stats>>
  readonly concurrent: Readonly<Record<Phase, Stats>>
  readonly concurrentWallMs: number
}

const summary = (samples: ReadonlyArray<Sample<Phase>>) =>
  Object.fromEntries(PHASES.map((phase) => [phase, stats(samples.map((s) => s[phase]))])) as Record<
    Phase,
    Stats
  >

const page = await serveLocalPage()
let service: TargetService | undefined
const cleanUp = async () => {
  await service?.stop()
  await page.close()
}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void cleanUp().finally(() => process.exit(130)))
}

try {
  log("starting the service in-process (pool of 2)")
  service = await startInProcess(2, process.env.CHROME_PATH)
  const { baseUrl } = service
  await waitForService(baseUrl, true)
  const key = await signUp(baseUrl)
  const settle = () => waitForService(baseUrl, true, 60_000)

  const targets: Array<{ name: string; start: () => Promise<Started>; ours: boolean }> = [
    { name: "direct puppeteer.launch", start: direct, ours: false },
    { name: "rbs browser session", start: ours(baseUrl, key, "browser"), ours: true },
    { name: "rbs context session", start: ours(baseUrl, key, "context"), ours: true },
    ...peers.map(({ name, url }) => ({ name, start: peer(url), ours: false }))
  ]
  const rows: Array<Row> = []
  for (const target of targets) {
    const run = lifecycle(target.start, page.url)
    log(
      `${target.name}: warm-up, ${ITERATIONS} back to back, ${CONCURRENCY} clients x ${CONCURRENT_ITERATIONS}`
    )
    await settle()
    await run()
    await settle()
    const sequential = await runSequential(ITERATIONS, run)
    await settle()
    const concurrent = await runConcurrent(CONCURRENCY, CONCURRENT_ITERATIONS, run)
    rows.push({
      name: target.name,
      sequential: summary(sequential.samples),
      concurrent: summary(concurrent.samples),
      concurrentWallMs: concurrent.wallMs
    })
  }

  const base = rows[0]!
  const pad = (text: string, width: number) => text.padEnd(width)
  const num = (value: number) => value.toFixed(0).padStart(6)
  const ratio = (value: number, of: number) => `${(value / of).toFixed(2)}x`.padStart(7)
  console.log(
    [
      "",
      `peers: the same lifecycle (start, first page, goto a local page, page.screenshot, end), ${Os.cpus().length} CPUs, node ${process.version}`,
      "",
      `${pad("", 26)}  back to back (${ITERATIONS})              ${CONCURRENCY} concurrent (${CONCURRENCY * CONCURRENT_ITERATIONS})`,
      `${pad("p50 ms", 26)}   start  total  ratio     start  total  ratio  sessions/s`,
      ...rows.map(
        (row) =>
          `${pad(row.name, 26)}  ${num(row.sequential.start.p50)} ${num(row.sequential.total.p50)} ${ratio(row.sequential.total.p50, base.sequential.total.p50)}    ${num(row.concurrent.start.p50)} ${num(row.concurrent.total.p50)} ${ratio(row.concurrent.total.p50, base.concurrent.total.p50)}  ${((CONCURRENCY * CONCURRENT_ITERATIONS) / (row.concurrentWallMs / 1000)).toFixed(2).padStart(10)}`
      ),
      "",
      "start: to a page in hand (ours: create, ready, connect; a peer: connect; direct: launch); ratio: total p50 / direct's",
      ""
    ].join("\n")
  )
  await Fs.writeFile(
    new URL("./last-run.json", import.meta.url),
    `${JSON.stringify({ finishedAt: new Date().toISOString(), cpus: Os.cpus().length, iterations: ITERATIONS, concurrency: CONCURRENCY, concurrentIterations: CONCURRENT_ITERATIONS, rows }, null, 2)}\n`
  )
} finally {
  await cleanUp()
}
