import { executableOf } from "../../src/runtimes/browser/Chromium.ts"
import * as Fs from "node:fs/promises"
import puppeteer from "puppeteer-core"
import type { ModeRun, Sample, ServiceTarget } from "./Lifecycle.ts"
import { call, createSession, json, sleep, waitForReady } from "./TargetService.ts"

/**
 * Sessions that arrive on a clock rather than one after another: `count`
 * iterations started `intervalMs` apart, whether or not earlier ones have
 * finished (the paced and the open-loop modes).
 */
export const runArrivals = async <P extends string>(
  count: number,
  intervalMs: number,
  iteration: () => Promise<Sample<P>>,
  onInFlight?: (inFlight: number) => void
): Promise<ModeRun<P>> => {
  const samples: Array<Sample<P>> = []
  const started = performance.now()
  const runs: Array<Promise<void>> = []
  let inFlight = 0
  for (let i = 0; i < count; i++) {
    // On the clock: the i-th starts at i x interval, however long the others take.
    const due = started + i * intervalMs
    const wait = due - performance.now()
    if (wait > 0) await sleep(wait)
    inFlight++
    onInFlight?.(inFlight)
    runs.push(
      iteration()
        .then((sample) => void samples.push(sample))
        .finally(() => {
          inFlight--
          onInFlight?.(inFlight)
        })
    )
  }
  const settled = await Promise.allSettled(runs)
  const wallMs = performance.now() - started
  const failure = settled.find((result) => result.status === "rejected")
  if (failure !== undefined) throw failure.reason
  return { samples, wallMs, poolIdleAtStart: [] }
}

export const HOLD_PHASES = ["create", "ready", "connect", "delete", "total"] as const
export const HOLD_BASELINE_PHASES = ["launch", "close", "total"] as const

/** A session that lives `holdMs` with a client connected: create, ready, connect, hold, delete. */
export const holdServiceIteration =
  ({ baseUrl, key }: ServiceTarget, holdMs: number) =>
  async (): Promise<Sample<(typeof HOLD_PHASES)[number]>> => {
    const t0 = performance.now()
    const created = await createSession(baseUrl, key)
    const t1 = performance.now()
    if (created.status !== 201) throw new Error(`create: HTTP ${created.status}`)
    const session: { id: string; cdp_url: string } = json(created.bytes)
    try {
      await waitForReady(baseUrl, key, session.id)
      const t2 = performance.now()
      const browser = await puppeteer.connect({
        browserWSEndpoint: session.cdp_url,
        headers: { Authorization: `Bearer ${key}` },
        defaultViewport: null
      })
      const t3 = performance.now()
      await sleep(holdMs)
      await browser.disconnect()
      const t4 = performance.now()
      const removed = await call(baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key })
      const t5 = performance.now()
      if (removed.status !== 204) throw new Error(`delete: HTTP ${removed.status}`)
      return { create: t1 - t0, ready: t2 - t0, connect: t3 - t2, delete: t5 - t4, total: t5 - t0 }
    } catch (error) {
      await call(baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key }).catch(() => {})
      throw error
    }
  }

/** The same with a Chromium of our own: launch, hold, close. */
export const holdBaselineIteration =
  (holdMs: number) => async (): Promise<Sample<(typeof HOLD_BASELINE_PHASES)[number]>> => {
    const t0 = performance.now()
    const browser = await puppeteer.launch({
      // The binary Debian's launcher script would exec, as the service runs it (`executableOf`).
      executablePath: executableOf(process.env.CHROME_PATH ?? "/usr/bin/chromium"),
      headless: true,
      handleSIGINT: false,
      handleSIGTERM: false,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
    })
    const t1 = performance.now()
    await sleep(holdMs)
    const t2 = performance.now()
    await browser.close()
    const t3 = performance.now()
    return { launch: t1 - t0, close: t3 - t2, total: t3 - t0 }
  }

/** Warm and cold acquires the service has counted (`/metrics`), to read a mode's warm-hit rate. */
export const acquires = async (baseUrl: string): Promise<{ warm: number; cold: number } | undefined> => {
  const response = await call(baseUrl, "GET", "/metrics").catch(() => undefined)
  if (response?.status !== 200) return undefined
  const text = new TextDecoder().decode(response.bytes)
  const read = (result: string) =>
    Number(new RegExp(`rbs_browser_pool_acquires_total\\{result="${result}"\\} (\\d+)`).exec(text)?.[1] ?? 0)
  return { warm: read("warm"), cold: read("cold") }
}

/** `rbs_browsers`: every browser of the node (warm, launching, in use, being torn down). */
export const browserCount = async (baseUrl: string): Promise<number | undefined> => {
  const response = await call(baseUrl, "GET", "/metrics").catch(() => undefined)
  if (response?.status !== 200) return undefined
  const match = /^rbs_browsers (\d+)/m.exec(new TextDecoder().decode(response.bytes))
  return match === null ? undefined : Number(match[1])
}

export const warmHitRate = (
  before: { warm: number; cold: number } | undefined,
  after: { warm: number; cold: number } | undefined
) => {
  if (before === undefined || after === undefined) return undefined
  const warm = after.warm - before.warm
  const total = warm + after.cold - before.cold
  return total === 0 ? undefined : warm / total
}

/**
 * Memory of every Chromium process below this one (the in-process service's
 * browsers), in bytes: PSS (`smaps_rollup`), which splits shared pages among
 * the processes sharing them, so the sum is not inflated the way RSS is.
 */
export const chromiumMemory = async (): Promise<number> => {
  const parents = new Map<number, number>()
  const chromium = new Set<number>()
  const rss = new Map<number, number>()
  for (const entry of await Fs.readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    const status = await Fs.readFile(`/proc/${entry}/status`, "utf8").catch(() => "")
    const ppid = Number(/^PPid:\s+(\d+)/m.exec(status)?.[1] ?? 0)
    parents.set(Number(entry), ppid)
    if (/^Name:\s+(chromium|chrome)/m.test(status)) chromium.add(Number(entry))
    rss.set(Number(entry), Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0) * 1024)
  }
  const below = (pid: number) => {
    for (let at = parents.get(pid); at !== undefined && at > 1; at = parents.get(at)) {
      if (at === process.pid) return true
    }
    return false
  }
  let total = 0
  for (const pid of chromium) {
    if (!below(pid)) continue
    const rollup = await Fs.readFile(`/proc/${pid}/smaps_rollup`, "utf8").catch(() => "")
    const pss = /^Pss:\s+(\d+)\s+kB/m.exec(rollup)?.[1]
    total += pss === undefined ? (rss.get(pid) ?? 0) : Number(pss) * 1024
  }
  return total
}
