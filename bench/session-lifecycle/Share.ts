// The service's own share of a context session: its lifecycle through the
// service beside the same page work on a bare Chromium already running, with
// a browser context and its page made ahead (the floor no service can beat).
// The difference is what the service adds: the create, the wait for ready,
// the relay's connect, the proxy's hop and the DELETE. See bench/README.md.
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { spawn } from "node:child_process"
import puppeteer, { type Browser, type BrowserContext, type Page } from "puppeteer-core"
import { embeddedUrl } from "../cost/PgStats.ts"
import { launchDirect, SERVICE_PHASES } from "./Lifecycle.ts"
import { type Stats, stats } from "./Report.ts"
import { call, createSession, json, sleep } from "./TargetService.ts"

/** The service side's phases: the lifecycle bench's own. */
export const SHARE_SERVICE_PHASES = SERVICE_PHASES
export const SHARE_FLOOR_PHASES = ["connect", "goto", "screenshot", "disconnect", "total"] as const

/** The round trips' floor of the parts with no floor in Chromium: a create's answer, a GET's, a DELETE's. */
export const ROUND_TRIP_PHASES = ["create", "get", "delete"] as const

type ServiceSample = Record<(typeof SHARE_SERVICE_PHASES)[number], number>
type FloorSample = Record<(typeof SHARE_FLOOR_PHASES)[number], number>
type RoundTripSample = Record<(typeof ROUND_TRIP_PHASES)[number], number>

/** The share's parts: each the service's phase less the floor's same step (create, ready and delete have none). */
export const SHARE_PARTS = [
  "create answer",
  "wait for ready",
  "connect, over the floor's",
  "page work, over the floor's",
  "delete answer",
  "share"
] as const
export type SharePart = (typeof SHARE_PARTS)[number]

const pageWork = (sample: { goto: number; screenshot: number; disconnect: number }) =>
  sample.goto + sample.screenshot + sample.disconnect

/** The same page work on both sides: goto, puppeteer's own screenshot, disconnect. */
const drive = async (browser: Browser, page: Page, pageUrl: string, t0: number) => {
  const t1 = performance.now()
  await page.goto(pageUrl)
  const t2 = performance.now()
  const shot = await page.screenshot()
  const t3 = performance.now()
  if (shot.length < 8) throw new Error("the screenshot is not a PNG")
  await browser.disconnect()
  const t4 = performance.now()
  return { connect: t1 - t0, goto: t2 - t1, screenshot: t3 - t2, disconnect: t4 - t3, total: t4 - t0 }
}

/**
 * A context session through the service, as a client drives it: create, a
 * GET until it says ready (the first poll at once, then every 5 ms), connect
 * with its first page, the page work, DELETE.
 */
export const shareServiceIteration = async (
  baseUrl: string,
  key: string,
  pageUrl: string
): Promise<ServiceSample> => {
  const t0 = performance.now()
  const created = await createSession(baseUrl, key, "context")
  const t1 = performance.now()
  if (created.status !== 201) throw new Error(`create: HTTP ${created.status}`)
  const session: { id: string; status: string; cdp_url: string } = json(created.bytes)
  let browser: Browser | undefined
  let deleted = false
  try {
    let status = session.status
    while (status !== "ready") {
      status = json((await call(baseUrl, "GET", `/v1/sessions/${session.id}`, { key })).bytes).status
      if (status !== "ready" && status !== "creating") throw new Error(`session became ${status}`)
      if (status !== "ready") await sleep(5)
    }
    const t2 = performance.now()
    browser = await puppeteer.connect({
      browserWSEndpoint: session.cdp_url,
      headers: { Authorization: `Bearer ${key}` },
      defaultViewport: null
    })
    const page = (await browser.pages())[0] ?? (await browser.newPage())
    const work = await drive(browser, page, pageUrl, t2)
    browser = undefined
    const t6 = performance.now()
    const removed = await call(baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key })
    deleted = true
    const t7 = performance.now()
    if (removed.status !== 204) throw new Error(`delete: HTTP ${removed.status}`)
    return { create: t1 - t0, ready: t2 - t1, ...work, delete: t7 - t6, total: t7 - t0 }
  } finally {
    if (browser !== undefined) await browser.disconnect().catch(() => {})
    if (!deleted) await call(baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key }).catch(() => {})
  }
}

/** The floor: one Chromium launched once, a browser context with its page made ahead of each session. */
export const startFloor = async () => {
  const browser = await launchDirect()
  // The tab it opened with: the service's shared browser keeps none either.
  for (const tab of await browser.pages()) await tab.close()
  const endpoint = browser.wsEndpoint()
  return {
    /** Made ahead, outside the timing: a context and its page, as the service makes them ahead. */
    ahead: async (): Promise<BrowserContext> => {
      const context = await browser.createBrowserContext()
      const page = await context.newPage()
      await page.setViewport({ width: 1280, height: 720 })
      return context
    },
    /** The timed part: connect, find the page made ahead, the page work, disconnect. */
    iteration: async (context: BrowserContext, pageUrl: string): Promise<FloorSample> => {
      const t0 = performance.now()
      // Its own context's targets only, as the relay shows a session its own.
      const client = await puppeteer.connect({
        browserWSEndpoint: endpoint,
        defaultViewport: null,
        targetFilter: (target) =>
          target.type() === "browser" ||
          (target as unknown as { _getTargetInfo(): { browserContextId?: string } })._getTargetInfo()
            .browserContextId === context.id
      })
      const mine = client.browserContexts().find((candidate) => candidate.id === context.id)
      const page = (await mine?.pages())?.[0]
      if (page === undefined) throw new Error("the floor's page made ahead is not there")
      return drive(client, page, pageUrl, t0)
    },
    close: () => browser.close()
  }
}

export type Floor = Awaited<ReturnType<typeof startFloor>>

/**
 * The service's Postgres, as the bench's own client reaches it: `DATABASE_URL` when the service was
 * given one, else the embedded server in its data dir (its socket in `postgres/run`).
 */
const serviceDatabaseUrl = (dataDir: string | undefined, database: string) => {
  const given = process.env.DATABASE_URL
  if (given !== undefined && given !== "") {
    const url = new URL(given)
    url.pathname = `/${database}`
    return url.toString()
  }
  return dataDir === undefined ? undefined : embeddedUrl(dataDir, database)
}

/** The database the round trips' floor writes in: its own, on the service's server. */
const FLOOR_DATABASE = "bench_round_trip_floor"

/**
 * The round trips' floor (`RoundTripFloor.ts`) in a process of its own, on the service's Postgres:
 * `undefined` when the bench cannot reach that Postgres (a service it did not start).
 */
export const startRoundTripFloor = async (dataDir: string | undefined) => {
  const admin = serviceDatabaseUrl(dataDir, "postgres")
  const url = serviceDatabaseUrl(dataDir, FLOOR_DATABASE)
  if (admin === undefined || url === undefined) return undefined
  await Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const [found] = yield* sql`SELECT 1 AS found FROM pg_database WHERE datname = ${FLOOR_DATABASE}`
      if (found === undefined) yield* sql.unsafe(`CREATE DATABASE ${FLOOR_DATABASE}`)
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(admin), maxConnections: 1 })))
  )
  const child = spawn(
    process.execPath,
    ["--experimental-strip-types", new URL("./RoundTripFloor.ts", import.meta.url).pathname],
    // Its stdin is the bench's: it ends with the bench, however the bench ends.
    { env: { ...process.env, FLOOR_DATABASE_URL: url }, stdio: ["pipe", "pipe", "inherit"] }
  )
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const port = await new Promise<number>((resolve, reject) => {
    let out = ""
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8")
      if (out.includes("\n")) resolve(Number(out.trim()))
    })
    child.once("exit", (code) => reject(new Error(`the round trips' floor exited (${code})`)))
  })
  const baseUrl = `http://127.0.0.1:${port}`
  const timed = async (method: string, path: string, status: number, body?: unknown) => {
    const t0 = performance.now()
    const answer = await call(baseUrl, method, path, body === undefined ? {} : { body })
    if (answer.status !== status)
      throw new Error(`the round trips' floor answered ${method} ${answer.status}`)
    return performance.now() - t0
  }
  return {
    /** The timed part: a create's answer, a GET's, a DELETE's, one after the other as a client sends them. */
    iteration: async (): Promise<RoundTripSample> => ({
      create: await timed("POST", "/v1/sessions", 201, { isolation: "context" }),
      get: await timed("GET", "/v1/sessions/floor", 200),
      delete: await timed("DELETE", "/v1/sessions/floor", 204)
    }),
    close: async () => {
      child.kill("SIGTERM")
      await exited
    }
  }
}

export type RoundTripFloor = NonNullable<Awaited<ReturnType<typeof startRoundTripFloor>>>

export interface ShareRun {
  readonly service: ReadonlyArray<ServiceSample>
  readonly floor: ReadonlyArray<FloorSample>
  /** The round trips' floor's, back to back only (by turns with the other two). */
  readonly roundTrips?: ReadonlyArray<RoundTripSample>
  readonly serviceWallMs: number
  readonly floorWallMs: number
}

/** How long each side of a back-to-back turn waits for the machine to settle before it starts. */
const QUIET_MS = 300

/** Back to back, by turns: a service session, then a floor one, so both meet the same machine. */
export const shareSequential = async (
  sessions: number,
  floor: Floor,
  service: () => Promise<ServiceSample>,
  pageUrl: string,
  roundTripFloor?: RoundTripFloor
): Promise<ShareRun> => {
  const serviceSamples: Array<ServiceSample> = []
  const floorSamples: Array<FloorSample> = []
  const roundTrips: Array<RoundTripSample> = []
  let serviceWallMs = 0
  let floorWallMs = 0
  for (let i = 0; i < sessions; i++) {
    // Each side starts on a quiet machine: the floor's context made ahead (its renderer started),
    // the service's made ahead, the last one's teardown done on both.
    const context = await floor.ahead()
    await sleep(QUIET_MS)
    let started = performance.now()
    serviceSamples.push(await service())
    serviceWallMs += performance.now() - started
    await sleep(QUIET_MS)
    started = performance.now()
    floorSamples.push(await floor.iteration(context, pageUrl))
    floorWallMs += performance.now() - started
    await context.close()
    if (roundTripFloor !== undefined) {
      await sleep(QUIET_MS)
      roundTrips.push(await roundTripFloor.iteration())
    }
  }
  return {
    service: serviceSamples,
    floor: floorSamples,
    ...(roundTripFloor === undefined ? {} : { roundTrips }),
    serviceWallMs,
    floorWallMs
  }
}

/**
 * `clients` loops at once, each `iterations` back to back: the service's, then
 * the floor's. Each floor loop makes its next context ahead before its timed
 * part (in its wall time, as the service makes its own ahead in its own): a
 * browser holding every context at once would make each connect attach to all.
 */
export const shareConcurrent = async (
  clients: number,
  iterations: number,
  floor: Floor,
  service: () => Promise<ServiceSample>,
  pageUrl: string
): Promise<ShareRun> => {
  const serviceSamples: Array<ServiceSample> = []
  const floorSamples: Array<FloorSample> = []
  let started = performance.now()
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = 0; i < iterations; i++) serviceSamples.push(await service())
    })
  )
  const serviceWallMs = performance.now() - started
  await sleep(500)
  started = performance.now()
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = 0; i < iterations; i++) {
        const context = await floor.ahead()
        floorSamples.push(await floor.iteration(context, pageUrl))
        await context.close()
      }
    })
  )
  const floorWallMs = performance.now() - started
  return { service: serviceSamples, floor: floorSamples, serviceWallMs, floorWallMs }
}

export interface ShareSummary {
  readonly label: string
  readonly sessions: number
  readonly service: Readonly<Record<string, Stats>>
  readonly floor: Readonly<Record<string, Stats>>
  /** Each part's p50 (ms): the service's phase, or its excess over the floor's same step. */
  readonly parts: Readonly<Record<SharePart, number>>
  /** The wall time a session of the service's beyond a floor's, concurrent runs: (wall − wall) / sessions. */
  readonly wallSharePerSession: number
  /**
   * The round trips' floor's own p50s (create, get, delete), and the service's create answer, wait
   * for ready (its GETs) and delete answer beyond them: what the service costs beyond the round trips
   * it makes. Back to back, when the bench reaches the service's Postgres.
   */
  readonly roundTrips?: {
    readonly floor: Readonly<Record<string, Stats>>
    readonly beyond: { readonly create: number; readonly get: number; readonly delete: number }
  }
}

const statsOf = <K extends string>(samples: ReadonlyArray<Record<K, number>>, phases: ReadonlyArray<K>) =>
  Object.fromEntries(phases.map((phase) => [phase, stats(samples.map((sample) => sample[phase]))])) as Record<
    K,
    Stats
  >

export const summarizeShare = (label: string, run: ShareRun): ShareSummary => {
  const service = statsOf(run.service, SHARE_SERVICE_PHASES)
  const floor = statsOf(run.floor, SHARE_FLOOR_PHASES)
  const work = (samples: ReadonlyArray<ServiceSample | FloorSample>) => stats(samples.map(pageWork)).p50
  return {
    label,
    sessions: run.service.length,
    service,
    floor,
    parts: {
      "create answer": service.create.p50,
      "wait for ready": service.ready.p50,
      "connect, over the floor's": service.connect.p50 - floor.connect.p50,
      "page work, over the floor's": work(run.service) - work(run.floor),
      "delete answer": service.delete.p50,
      share: service.total.p50 - floor.total.p50
    },
    wallSharePerSession: (run.serviceWallMs - run.floorWallMs) / run.service.length,
    ...(run.roundTrips === undefined || run.roundTrips.length === 0
      ? {}
      : (() => {
          const trips = statsOf(run.roundTrips, ROUND_TRIP_PHASES)
          return {
            roundTrips: {
              floor: trips,
              beyond: {
                create: service.create.p50 - trips.create.p50,
                // The wait is its GETs: most often one, found ready.
                get: service.ready.p50 - trips.get.p50,
                delete: service.delete.p50 - trips.delete.p50
              }
            }
          }
        })())
  }
}

export interface ShareCheck {
  readonly part: string
  readonly p50: number
  readonly budget: number
  readonly ok: boolean
}

/** Each part against `bench/budget.json`'s `shareMs` (20% over fails, as the phases'). */
export const shareChecks = (
  summary: ShareSummary,
  budget: Readonly<Record<string, number>>,
  slack: number,
  concurrent: boolean
): ReadonlyArray<ShareCheck> =>
  Object.entries(budget).map(([part, limit]) => {
    const p50 =
      concurrent && part === "share"
        ? summary.wallSharePerSession
        : (summary.parts as Record<string, number>)[part]
    if (p50 === undefined) throw new Error(`bench/budget.json's shareMs names no part "${part}"`)
    return { part, p50, budget: limit, ok: p50 <= limit * slack }
  })

const f = (value: number) => value.toFixed(1)

export const renderShare = (summary: ShareSummary, checks: ReadonlyArray<ShareCheck>) =>
  [
    `${summary.label}: ${summary.sessions} context sessions beside as many on a bare Chromium (a context and page made ahead), p50 ms`,
    `  service: ${SHARE_SERVICE_PHASES.map((phase) => `${phase} ${f(summary.service[phase]!.p50)}`).join(", ")}`,
    `  floor:   ${SHARE_FLOOR_PHASES.map((phase) => `${phase} ${f(summary.floor[phase]!.p50)}`).join(", ")}`,
    `  the service's share, by part: ${SHARE_PARTS.map((part) => `${part} ${f(summary.parts[part])}`).join(", ")}`,
    `  wall time a session beyond the floor's: ${f(summary.wallSharePerSession)}`,
    ...(summary.roundTrips === undefined
      ? []
      : [
          `  the round trips' floor (the same HTTP and Postgres round trips, no work in them): create ${f(summary.roundTrips.floor.create!.p50)}, get ${f(summary.roundTrips.floor.get!.p50)}, delete ${f(summary.roundTrips.floor.delete!.p50)}`,
          `  the service beyond its round trips: create answer ${f(summary.roundTrips.beyond.create)}, wait for ready ${f(summary.roundTrips.beyond.get)}, delete answer ${f(summary.roundTrips.beyond.delete)}`
        ]),
    ...checks.map(
      (check) =>
        `  ${check.part.padEnd(30)} ${f(check.p50).padStart(7)}   budget ${String(check.budget).padStart(4)}   ${check.ok ? "ok" : "OVER"}`
    )
  ].join("\n")
