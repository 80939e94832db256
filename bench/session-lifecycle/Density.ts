// How many sessions one node holds, and what each costs in memory: sessions
// are opened one after another (each loaded with the bench page, then left
// open with no client) until create-to-ready degrades, memory runs low or
// the cap is reached; then every one is deleted.
import * as Fs from "node:fs/promises"
import puppeteer from "puppeteer-core"
import { chromiumMemory } from "./Arrivals.ts"
import { stats } from "./Report.ts"
import { call, createSession, json, type SessionIsolation, sleep, waitForReady } from "./TargetService.ts"

/** create-to-ready p95 over the last WINDOW creates: past `READY_P95_LIMIT_MS` the node holds no more. */
export const WINDOW = 10
export const READY_P95_LIMIT_MS = 1000

export interface DensityOptions {
  readonly baseUrl: string
  readonly key: string
  readonly pageUrl: string
  readonly kind: SessionIsolation
  /** Sessions at most (the ramp stops there even when still fast). */
  readonly max: number
  /** One create starts at most this often (a create waits for the last one to be loaded). */
  readonly intervalMs: number
  /** The ramp stops when the machine's MemAvailable falls below this. */
  readonly memoryFloorBytes: number
  readonly log: (message: string) => void
}

export interface DensityStep {
  readonly live: number
  readonly readyMs: number
  /** p95 of the last WINDOW creates' create-to-ready, once there are that many. */
  readonly windowP95Ms: number | undefined
}

export interface DensityResult {
  readonly kind: SessionIsolation
  /** The most sessions open at once while the rolling create-to-ready p95 stayed at or under the limit. */
  readonly heldSessions: number
  readonly stoppedBy: "ready p95" | "memory" | "cap" | "error"
  readonly error?: string
  /** PSS of the service's Chromiums with no session open (the warm pool), and at the top of the ramp. */
  readonly pssIdleBytes: number
  readonly pssTopBytes: number
  /** (top - idle) / sessions open at the top: what one more live session costs. */
  readonly pssPerSessionBytes: number | undefined
  readonly ready: ReturnType<typeof stats> | undefined
  readonly steps: ReadonlyArray<DensityStep>
}

/** MemAvailable from /proc/meminfo, in bytes. */
export const memAvailable = async (): Promise<number> => {
  const info = await Fs.readFile("/proc/meminfo", "utf8")
  return Number(/^MemAvailable:\s+(\d+)\s+kB/m.exec(info)?.[1] ?? 0) * 1024
}

/** Opens one session of `kind`, waits for ready, loads the page, and leaves it open; answers its id and create-to-ready. */
const openOne = async (options: DensityOptions) => {
  const { baseUrl, key } = options
  const t0 = performance.now()
  const created = await createSession(baseUrl, key, options.kind)
  if (created.status !== 201)
    throw new Error(
      `create: HTTP ${created.status}: ${new TextDecoder().decode(created.bytes).slice(0, 300)}`
    )
  const session: { id: string; cdp_url: string } = json(created.bytes)
  await waitForReady(baseUrl, key, session.id)
  const readyMs = performance.now() - t0
  const browser = await puppeteer.connect({
    browserWSEndpoint: session.cdp_url,
    headers: { Authorization: `Bearer ${key}` },
    defaultViewport: null
  })
  try {
    const page = (await browser.pages())[0] ?? (await browser.newPage())
    await page.goto(options.pageUrl)
  } finally {
    await browser.disconnect()
  }
  return { id: session.id, readyMs }
}

export const ramp = async (options: DensityOptions): Promise<DensityResult> => {
  const open: Array<string> = []
  const steps: Array<DensityStep> = []
  const readies: Array<number> = []
  let held = 0
  let stoppedBy: DensityResult["stoppedBy"] = "cap"
  let error: string | undefined
  const pssIdleBytes = await chromiumMemory()
  let pssTopBytes = pssIdleBytes
  try {
    while (open.length < options.max) {
      if ((await memAvailable()) < options.memoryFloorBytes) {
        stoppedBy = "memory"
        break
      }
      const started = performance.now()
      const { id, readyMs } = await openOne(options)
      open.push(id)
      readies.push(readyMs)
      const window = readies.slice(-WINDOW)
      const windowP95Ms = window.length < WINDOW ? undefined : stats(window).p95
      steps.push({ live: open.length, readyMs, windowP95Ms })
      if (windowP95Ms !== undefined && windowP95Ms > READY_P95_LIMIT_MS) {
        stoppedBy = "ready p95"
        break
      }
      held = open.length
      if (open.length % 10 === 0) {
        options.log(
          `density ${options.kind}: ${open.length} open, last ready ${readyMs.toFixed(0)} ms, window p95 ${windowP95Ms?.toFixed(0) ?? "-"} ms`
        )
      }
      const wait = started + options.intervalMs - performance.now()
      if (wait > 0) await sleep(wait)
    }
    // Let the last pages settle before reading memory.
    await sleep(2000)
    pssTopBytes = await chromiumMemory()
  } catch (cause) {
    stoppedBy = "error"
    error = String(cause)
    options.log(`density ${options.kind}: stopped by an error at ${open.length} open: ${error}`)
  } finally {
    for (const id of open) {
      await call(options.baseUrl, "DELETE", `/v1/sessions/${id}`, { key: options.key }).catch(() => {})
    }
  }
  return {
    kind: options.kind,
    heldSessions: held,
    stoppedBy,
    ...(error === undefined ? {} : { error }),
    pssIdleBytes,
    pssTopBytes,
    pssPerSessionBytes: open.length === 0 ? undefined : (pssTopBytes - pssIdleBytes) / open.length,
    ready: readies.length === 0 ? undefined : stats(readies),
    steps
  }
}
