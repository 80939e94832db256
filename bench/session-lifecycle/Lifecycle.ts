import { executableOf } from "../../src/runtimes/browser/Chromium.ts"
import puppeteer, { type Browser, type Page } from "puppeteer-core"
import { call, createSession, json, readyz, waitForReady } from "./TargetService.ts"

export const SERVICE_PHASES = [
  "create",
  "ready",
  "connect",
  "goto",
  "screenshot",
  "disconnect",
  "delete",
  "total"
] as const
export const BASELINE_PHASES = ["launch", "goto", "screenshot", "close", "total"] as const

export type ServicePhase = (typeof SERVICE_PHASES)[number]
export type BaselinePhase = (typeof BASELINE_PHASES)[number]
export type Sample<P extends string> = Readonly<Record<P, number>>

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes).slice(0, 500)

const isPng = (bytes: Uint8Array) =>
  bytes.length > PNG_SIGNATURE.length && PNG_SIGNATURE.every((byte, i) => bytes[i] === byte)

/** The flow's page: the tab the browser opened with, or a new one when there is none. */
const firstPage = async (browser: Browser): Promise<Page> => (await browser.pages())[0] ?? browser.newPage()

export interface ServiceTarget {
  readonly baseUrl: string
  readonly key: string
  readonly pageUrl: string
  /** Told each session's id once it is created (the cluster bench looks up its node). */
  readonly onCreated?: (id: string) => void
}

/**
 * One session through the service, as a client would drive it. `ready` runs
 * from the start of the POST to the first poll that sees `ready`; `connect`
 * ends with a page in hand. The session is deleted even when a step fails.
 */
export const serviceIteration = async ({
  baseUrl,
  key,
  pageUrl,
  onCreated
}: ServiceTarget): Promise<Sample<ServicePhase>> => {
  const t0 = performance.now()
  const created = await createSession(baseUrl, key)
  const t1 = performance.now()
  if (created.status !== 201) throw new Error(`create: HTTP ${created.status}: ${text(created.bytes)}`)
  const session: { id: string; cdp_url: string } = json(created.bytes)
  onCreated?.(session.id)
  let browser: Browser | undefined
  let deleted = false
  try {
    await waitForReady(baseUrl, key, session.id)
    const t2 = performance.now()
    browser = await puppeteer.connect({
      browserWSEndpoint: session.cdp_url,
      headers: { Authorization: `Bearer ${key}` },
      defaultViewport: null
    })
    const page = await firstPage(browser)
    const t3 = performance.now()
    await page.goto(pageUrl)
    const t4 = performance.now()
    const shot = await call(baseUrl, "POST", `/v1/sessions/${session.id}/screenshot`, { key })
    const t5 = performance.now()
    if (shot.status !== 200 || !isPng(shot.bytes))
      throw new Error(`screenshot: HTTP ${shot.status}, not a PNG`)
    await browser.disconnect()
    browser = undefined
    const t6 = performance.now()
    const removed = await call(baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key })
    deleted = true
    const t7 = performance.now()
    if (removed.status !== 204) throw new Error(`delete: HTTP ${removed.status}: ${text(removed.bytes)}`)
    return {
      create: t1 - t0,
      ready: t2 - t0,
      connect: t3 - t2,
      goto: t4 - t3,
      screenshot: t5 - t4,
      disconnect: t6 - t5,
      delete: t7 - t6,
      total: t7 - t0
    }
  } finally {
    if (browser !== undefined) await browser.disconnect().catch(() => {})
    if (!deleted) await call(baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key }).catch(() => {})
  }
}

/** The switches a user's own `puppeteer.launch` would pass on a server (the benches' direct side). */
export const DIRECT_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-dev-shm-usage",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/**
 * A Chromium of our own, the binary Debian's launcher script would exec (as
 * the service runs it, `executableOf`), with the service's 1280x720 viewport
 * so both sides' screenshots encode the same pixels (puppeteer's default
 * would be 800x600).
 */
export const launchDirect = () =>
  puppeteer.launch({
    executablePath: executableOf(process.env.CHROME_PATH ?? "/usr/bin/chromium"),
    headless: true,
    defaultViewport: { width: 1280, height: 720 },
    // The benches stop the service on a signal; puppeteer's own handlers would exit before that finishes.
    handleSIGINT: false,
    handleSIGTERM: false,
    args: DIRECT_ARGS
  })

/** The same work with a Chromium of our own (`launchDirect`). */
export const baselineIteration = async (pageUrl: string): Promise<Sample<BaselinePhase>> => {
  const t0 = performance.now()
  const browser = await launchDirect()
  let closed = false
  try {
    const page = await firstPage(browser)
    const t1 = performance.now()
    await page.goto(pageUrl)
    const t2 = performance.now()
    const shot = await page.screenshot()
    const t3 = performance.now()
    if (!isPng(shot)) throw new Error("baseline screenshot is not a PNG")
    closed = true
    await browser.close()
    const t4 = performance.now()
    return { launch: t1 - t0, goto: t2 - t1, screenshot: t3 - t2, close: t4 - t3, total: t4 - t0 }
  } finally {
    if (!closed) await browser.close().catch(() => {})
  }
}

export interface ModeRun<P extends string> {
  readonly samples: ReadonlyArray<Sample<P>>
  readonly wallMs: number
  /** Sequential service runs only: warm browsers in the pool before each iteration (outside the timings). */
  readonly poolIdleAtStart: ReadonlyArray<number>
}

export const runSequential = async <P extends string>(
  iterations: number,
  iteration: () => Promise<Sample<P>>,
  poolProbe?: string
): Promise<ModeRun<P>> => {
  const samples: Array<Sample<P>> = []
  const poolIdleAtStart: Array<number> = []
  let wallMs = 0
  for (let i = 0; i < iterations; i++) {
    if (poolProbe !== undefined) poolIdleAtStart.push((await readyz(poolProbe))?.idle ?? -1)
    const start = performance.now()
    samples.push(await iteration())
    wallMs += performance.now() - start
  }
  return { samples, wallMs, poolIdleAtStart }
}

/** `clients` loops at once, each doing `iterations` back to back; every loop finishes before a failure is thrown. */
export const runConcurrent = async <P extends string>(
  clients: number,
  iterations: number,
  iteration: () => Promise<Sample<P>>
): Promise<ModeRun<P>> => {
  const samples: Array<Sample<P>> = []
  const start = performance.now()
  const loops = Array.from({ length: clients }, async () => {
    for (let i = 0; i < iterations; i++) samples.push(await iteration())
  })
  const settled = await Promise.allSettled(loops)
  const wallMs = performance.now() - start
  const failure = settled.find((result) => result.status === "rejected")
  if (failure !== undefined) throw failure.reason
  return { samples, wallMs, poolIdleAtStart: [] }
}
