// Context sessions in bursts: five created at once, the next five a while
// later, against two services in the same run, by turns: one keeping a single
// context made ahead a shared browser (`CONTEXT_WARM_MAX=1`, as before
// 2026-11-29), one sizing them by the account's demand (the default). See
// bench/README.md ("Context sessions in bursts").
import * as Fs from "node:fs/promises"
import puppeteer from "puppeteer-core"
import { stats } from "./Report.ts"
import {
  call,
  createSession,
  intFromEnv,
  json,
  signUp,
  sleep,
  startChildProcess,
  type TargetService,
  waitForReady
} from "./TargetService.ts"

const ROUNDS = intFromEnv("BENCH_BURSTS", 8)
const SIZE = intFromEnv("BENCH_BURST_SIZE", 5)
const GAP_MS = intFromEnv("BENCH_BURST_GAP_MS", 1500)
const resultFile = new URL("./last-bursts-run.json", import.meta.url)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

interface Side {
  readonly name: string
  readonly service: TargetService
  readonly key: string
  readonly samples: Array<number>
}

/** One session: create, ready, connected with its first page in hand (ms), then deleted. */
const one = async (side: Side) => {
  const t0 = performance.now()
  const created = await createSession(side.service.baseUrl, side.key, "context")
  if (created.status !== 201) throw new Error(`create: HTTP ${created.status}`)
  const session: { id: string; cdp_url: string } = json(created.bytes)
  await waitForReady(side.service.baseUrl, side.key, session.id)
  const browser = await puppeteer.connect({
    browserWSEndpoint: session.cdp_url,
    headers: { Authorization: `Bearer ${side.key}` },
    defaultViewport: null
  })
  const [page] = await browser.pages()
  await page!.evaluate("1")
  const ms = performance.now() - t0
  await browser.disconnect()
  await call(side.service.baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key: side.key })
  return ms
}

const acquires = async (side: Side) => {
  const text = new TextDecoder().decode((await call(side.service.baseUrl, "GET", "/metrics")).bytes)
  const count = (result: string) =>
    Number(new RegExp(`^rbs_context_acquires_total\\{result="${result}"\\} (\\d+)`, "m").exec(text)?.[1] ?? 0)
  return { warm: count("warm"), cold: count("cold") }
}

const start = async (name: string, env: Record<string, string>): Promise<Side> => {
  const service = await startChildProcess(
    { BROWSER_POOL_SIZE: "2", LIMIT_SESSION_CREATES_PER_MINUTE: "100000", ...env },
    undefined
  )
  return { name, service, key: await signUp(service.baseUrl), samples: [] }
}

const sides = [await start("one made ahead", { CONTEXT_WARM_MAX: "1" }), await start("by demand", {})]
try {
  // The first burst of each is not counted: it meets what the account had before it came.
  for (let round = 0; round <= ROUNDS; round++) {
    for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
      const times = await Promise.all(Array.from({ length: SIZE }, () => one(side)))
      if (round > 0) side.samples.push(...times)
      await sleep(GAP_MS)
    }
  }
  const results = []
  for (const side of sides) {
    const figures = stats(side.samples)
    const handed = await acquires(side)
    results.push({ side: side.name, createToConnected: figures, acquires: handed })
    log(
      `${side.name}: ${ROUNDS} bursts of ${SIZE}, create to connected p50 ${figures.p50.toFixed(1)} ms, p95 ${figures.p95.toFixed(1)} ms; contexts handed over made ahead ${handed.warm}, made on the path ${handed.cold}`
    )
  }
  const ratio = results[1]!.createToConnected.p50 / results[0]!.createToConnected.p50
  log(`by demand / one made ahead, p50: ${ratio.toFixed(2)}x`)
  await Fs.writeFile(
    resultFile,
    `${JSON.stringify({ at: new Date().toISOString(), rounds: ROUNDS, size: SIZE, gapMs: GAP_MS, ratio, results }, null, 2)}\n`
  )
} finally {
  for (const side of sides) await side.service.stop()
}
