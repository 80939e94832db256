// Live view, recordings and the dashboard, measured against `npm start`'s
// service: frame latency (a page change to its frame at a viewer) beside a
// direct CDP screencast of a local Chromium in the same run; CPU and bytes
// per viewer at 5 frames a second; recording sizes; the dashboard's first
// load. See bench/README.md.
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Os from "node:os"
import { chromium } from "playwright-core"
import puppeteer, { type Page } from "puppeteer-core"
import WebSocket from "ws"
import { stats } from "../session-lifecycle/Report.ts"
import {
  call,
  intFromEnv,
  json,
  signUp,
  sleep,
  startChildProcess
} from "../session-lifecycle/TargetService.ts"
import { cpuDuring } from "./ProcessCpu.ts"

const CHROME = process.env.CHROME_PATH ?? "/usr/bin/chromium"
const CHANGES = intFromEnv("BENCH_CHANGES", 40)
const WINDOW_S = intFromEnv("BENCH_WINDOW_SECONDS", 10)
const RECORD_S = intFromEnv("BENCH_RECORD_SECONDS", 30)
const resultFile = new URL("./last-run.json", import.meta.url)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

/** A counter page (`#n`, changed by the bench) and a page repainting every animation frame. */
const PAGES: Record<string, string> = {
  "/counter": `<!doctype html><title>counter</title><body style="margin:0;font:120px sans-serif"><div id="n">0</div>`,
  "/animated":
    `<!doctype html><title>animated</title><body style="margin:0"><div id="b" style="position:absolute;top:100px;width:200px;height:200px;background:#c0392b"></div>` +
    `<script>const f = (t) => { b.style.left = (t / 3 % 1000) + "px"; requestAnimationFrame(f) }; requestAnimationFrame(f)</script>`
}
const pages = Http.createServer((request, response) => {
  response
    .writeHead(200, { "content-type": "text/html" })
    .end(PAGES[request.url ?? ""] ?? "<title>blank</title>")
})
await new Promise<void>((resolve) => pages.listen(0, "127.0.0.1", resolve))
const pageUrl = (path: string) => `http://127.0.0.1:${(pages.address() as AddressInfo).port}${path}`

/** A live-view client: JPEG arrival times and sizes. */
const watch = (url: string) => {
  const ws = new WebSocket(url, { perMessageDeflate: false })
  const frames: Array<{ readonly at: number; readonly bytes: number }> = []
  ws.on("message", (data: Buffer, binary) => {
    if (binary) frames.push({ at: performance.now(), bytes: data.length })
  })
  const opened = new Promise<void>((resolve, reject) =>
    ws.once("open", () => resolve()).once("error", reject)
  )
  return { ws, frames, opened }
}

const until = async (what: string, ready: () => boolean, timeoutMs = 15_000) => {
  const deadline = Date.now() + timeoutMs
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(1)
  }
}

/** Page change to the next frame's arrival, `CHANGES` times, each after a quiet half second. */
const latencies = async (page: Page, frameCount: () => number, arrivalOf: (i: number) => number) => {
  const samples: Array<number> = []
  for (let i = 1; i <= CHANGES; i++) {
    await sleep(500)
    const before = frameCount()
    const start = performance.now()
    void page.evaluate(`document.getElementById("n").textContent = ${i}`)
    await until("a frame", () => frameCount() > before)
    samples.push(arrivalOf(before) - start)
  }
  return stats(samples)
}

const service = await startChildProcess(
  { BROWSER_POOL_SIZE: "1", LIMIT_VIEWERS_PER_SESSION: "20", LIMIT_PREVIEW_TOKENS_PER_MINUTE: "100" },
  CHROME
)
const results: Record<string, unknown> = {}
try {
  const key = await signUp(service.baseUrl)
  const newSession = async (body: object = {}) => {
    const created = json((await call(service.baseUrl, "POST", "/v1/sessions", { key, body })).bytes)
    while (
      json((await call(service.baseUrl, "GET", `/v1/sessions/${created.id}`, { key })).bytes).status !==
      "ready"
    )
      await sleep(20)
    const browser = await puppeteer.connect({
      browserWSEndpoint: created.cdp_url,
      headers: { authorization: `Bearer ${key}` },
      defaultViewport: null
    })
    const [page] = await browser.pages()
    return { id: created.id as string, browser, page: page! }
  }
  const token = async (id: string) =>
    json((await call(service.baseUrl, "POST", `/v1/sessions/${id}/preview-token`, { key, body: {} })).bytes)
      .url as string

  // 1. Latency, through the service and straight from a local Chromium's screencast.
  log("latency: a page change to its frame at the viewer")
  const session = await newSession()
  await session.page.goto(pageUrl("/counter"))
  const viewer = watch(await token(session.id))
  await viewer.opened
  await until("the first frame", () => viewer.frames.length > 0)
  const throughService = await latencies(
    session.page,
    () => viewer.frames.length,
    (i) => viewer.frames[i]!.at
  )
  viewer.ws.close()

  const local = await puppeteer.launch({
    executablePath: CHROME,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--window-size=1280,720"],
    defaultViewport: { width: 1280, height: 720 }
  })
  const localPage = (await local.pages())[0]!
  await localPage.goto(pageUrl("/counter"))
  const cdp = await localPage.createCDPSession()
  const direct: Array<number> = []
  cdp.on("Page.screencastFrame", (frame) => {
    direct.push(performance.now())
    // An ack in flight when the browser closes is refused; the frame was counted already.
    cdp.send("Page.screencastFrameAck", { sessionId: frame.sessionId }).catch(() => undefined)
  })
  await cdp.send("Page.startScreencast", { format: "jpeg", quality: 70 })
  await until("the first direct frame", () => direct.length > 0)
  const directLatency = await latencies(
    localPage,
    () => direct.length,
    (i) => direct[i]!
  )
  // The same animated page on the local Chromium, its screencast acknowledged at once (no limit).
  await localPage.goto(pageUrl("/animated"))
  await sleep(1500)
  const mark = direct.length
  const { used: unthrottled } = await cpuDuring(local.process()!.pid!, () => sleep(WINDOW_S * 1000))
  results.directAnimated = {
    fps: (direct.length - mark) / WINDOW_S,
    cpuPercent: (100 * (unthrottled.service + unthrottled.browsers + unthrottled.other)) / WINDOW_S
  }
  await local.close()
  results.latencyMs = { service: throughService, direct: directLatency }

  // 2. An animated page: frames a second, bytes a second and CPU, with 0, 1, 5 and 10 viewers.
  log(`an animated page, ${WINDOW_S} s with 0, 1, 5 and 10 viewers`)
  await session.page.goto(pageUrl("/animated"))
  const perViewers: Array<Record<string, unknown>> = []
  for (const count of [0, 1, 5, 10]) {
    const viewers = await Promise.all(
      Array.from({ length: count }, async () => watch(await token(session.id)))
    )
    await Promise.all(viewers.map((v) => v.opened))
    await sleep(1500)
    const marks = viewers.map((v) => v.frames.length)
    const { used } = await cpuDuring(service.pid!, () => sleep(WINDOW_S * 1000))
    const received = viewers.map((v, i) => v.frames.slice(marks[i]))
    perViewers.push({
      viewers: count,
      fps: count === 0 ? 0 : received[0]!.length / WINDOW_S,
      bytesPerSecondPerViewer:
        count === 0
          ? 0
          : received.reduce((sum, f) => sum + f.reduce((s, x) => s + x.bytes, 0), 0) / count / WINDOW_S,
      cpuPercent: {
        service: (100 * used.service) / WINDOW_S,
        browsers: (100 * used.browsers) / WINDOW_S
      }
    })
    for (const v of viewers) v.ws.close()
    await sleep(500)
  }
  results.animated = perViewers
  await session.browser.disconnect()
  await call(service.baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key })

  // 3. Recordings: a page changing once a second, and the animated page.
  const recordings: Array<Record<string, unknown>> = []
  for (const [name, path] of [
    ["changing once a second", "/counter"],
    ["animated", "/animated"]
  ] as const) {
    log(`recording ${RECORD_S} s of a page ${name}`)
    const recorded = await newSession({ recording: true })
    await recorded.page.goto(pageUrl(path))
    for (let s = 0; s < RECORD_S; s++) {
      if (path === "/counter") void recorded.page.evaluate(`document.getElementById("n").textContent = ${s}`)
      await sleep(1000)
    }
    await recorded.browser.disconnect()
    await call(service.baseUrl, "DELETE", `/v1/sessions/${recorded.id}`, { key })
    const ended = Date.now()
    let view: any
    do {
      await sleep(100)
      view = json((await call(service.baseUrl, "GET", `/v1/sessions/${recorded.id}`, { key })).bytes)
    } while (view.recording.status === "processing" || view.recording.status === "recording")
    recordings.push({
      page: name,
      status: view.recording.status,
      frames: view.recording.frames,
      durationS: view.recording.duration_ms / 1000,
      bytes: view.recording.bytes,
      kilobytesPerMinute: view.recording.bytes / 1e3 / (view.recording.duration_ms / 60_000),
      readyAfterEndMs: Date.now() - ended
    })
  }
  results.recordings = recordings

  // 4. The dashboard's first load, with an empty cache each time.
  log("the dashboard's first load")
  if ((await call(service.baseUrl, "GET", "/")).status !== 200) {
    log("the dashboard is not built (npm run build:web): skipped")
  } else {
    const viewerBrowser = await chromium.launch({ executablePath: CHROME, args: ["--no-sandbox"] })
    const loads: Array<{ ms: number; bytes: number; requests: number }> = []
    for (let i = 0; i < 5; i++) {
      const context = await viewerBrowser.newContext()
      const page = await context.newPage()
      const responses: Array<Promise<number>> = []
      page.on("requestfinished", (request) =>
        responses.push(request.sizes().then((sizes) => sizes.responseBodySize + sizes.responseHeadersSize))
      )
      const start = performance.now()
      await page.goto(`${service.baseUrl}/`)
      await page.getByRole("heading", { name: "Log in" }).waitFor()
      const ms = performance.now() - start
      await page.waitForLoadState("networkidle")
      const sizes = await Promise.all(responses)
      loads.push({ ms, bytes: sizes.reduce((a, b) => a + b, 0), requests: sizes.length })
      await context.close()
    }
    await viewerBrowser.close()
    results.dashboard = {
      firstLoadMs: stats(loads.map((l) => l.ms)),
      transferredBytes: loads[0]!.bytes,
      requests: loads[0]!.requests
    }
  }
} finally {
  await service.stop()
  pages.close()
}

const machine = { cpus: Os.cpus().length, node: process.version }
const round = (value: unknown): unknown =>
  typeof value === "number"
    ? Math.round(value * 10) / 10
    : Array.isArray(value)
      ? value.map(round)
      : typeof value === "object" && value !== null
        ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, round(v)]))
        : value
const report = round({ finishedAt: new Date().toISOString(), machine, ...results })
console.log(JSON.stringify(report, null, 2))
await Fs.writeFile(resultFile, `${JSON.stringify(report, null, 2)}\n`)
