import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import {
  BASELINE_PHASES,
  baselineIteration,
  runConcurrent,
  runSequential,
  SERVICE_PHASES,
  serviceIteration,
  type ServiceTarget
} from "./Lifecycle.ts"
import {
  acquires,
  browserCount,
  chromiumMemory,
  HOLD_BASELINE_PHASES,
  HOLD_PHASES,
  holdBaselineIteration,
  holdServiceIteration,
  runArrivals,
  warmHitRate
} from "./Arrivals.ts"
import { type DensityResult, ramp, READY_P95_LIMIT_MS, WINDOW } from "./Density.ts"
import { serveLocalPage } from "./LocalPage.ts"
import {
  BUDGET_SLACK,
  budgetChecks,
  PHASES,
  phaseTimes,
  readBudget,
  readShareBudget,
  renderMedianTree,
  renderPhases,
  renderSpans,
  serverSpan,
  startCollector
} from "./Phases.ts"
import { SETTLED_PHASES, type SettledPhase, settledIteration } from "./Settled.ts"
import {
  renderShare,
  shareChecks,
  shareConcurrent,
  shareSequential,
  shareServiceIteration,
  startFloor,
  startRoundTripFloor,
  summarizeShare
} from "./Share.ts"
import {
  CONTEXT_TARGETS,
  compare,
  densityVerdict,
  mb,
  renderDensity,
  renderLogsCost,
  renderMode,
  stats,
  summarize,
  TARGETS,
  verdict
} from "./Report.ts"
import {
  capacityRefusals,
  external,
  intFromEnv,
  isolation,
  readyz,
  rssBytes,
  signUp,
  createBody,
  uploadExtension,
  sleep,
  startInProcess,
  startChildProcess,
  DENSITY_CAPACITY,
  type TargetService,
  waitForService
} from "./TargetService.ts"

const iterations = intFromEnv("BENCH_ITERATIONS", 20, 1)
const concurrency = intFromEnv("BENCH_CONCURRENCY", 5, 1)
const concurrentIterations = intFromEnv("BENCH_CONCURRENT_ITERATIONS", 4, 1)
const poolSize = intFromEnv("BROWSER_POOL_SIZE", 2, 0)
const pacedSessions = intFromEnv("BENCH_PACED_SESSIONS", 20, 1)
const pacedIntervalMs = intFromEnv("BENCH_PACED_INTERVAL_MS", 500, 1)
const openRatePerMinute = intFromEnv("BENCH_OPEN_RATE_PER_MINUTE", 60, 1)
const openSeconds = intFromEnv("BENCH_OPEN_SECONDS", 60, 1)
const openHoldMs = intFromEnv("BENCH_OPEN_HOLD_MS", 5000, 0)
const settledSessions = intFromEnv("BENCH_SETTLED_SESSIONS", 10, 1)
/** Context sessions a side in the share mode, back to back; five at once take 4 each. */
const shareSessions = intFromEnv("BENCH_SHARE_SESSIONS", 20, 1)
/** `BENCH_ONLY=share`: the share modes alone (a quick look at the service's own share). */
const only = process.env.BENCH_ONLY
/** Sessions a side in the logs on / off mode. */
const logsSessions = intFromEnv("BENCH_LOGS_SESSIONS", 15, 1)
const densityMax = intFromEnv("BENCH_DENSITY_MAX", 120, 0)
const densityIntervalMs = intFromEnv("BENCH_DENSITY_INTERVAL_MS", 1000, 1)
/** The kinds the density ramp opens (`BENCH_DENSITY_KINDS=browser` for one alone). */
const densityKinds = (process.env.BENCH_DENSITY_KINDS ?? "browser,context")
  .split(",")
  .map((kind) => kind.trim())
  .filter((kind): kind is "browser" | "context" => kind === "browser" || kind === "context")
const benchUrl = process.env.BENCH_URL
// Each isolation's last run is kept apart: bench/README.md quotes both.
const resultFile = new URL(
  process.env.BENCH_CREATE_BODY || process.env.BENCH_EXTENSION_ZIP
    ? "./last-run-body.json"
    : isolation === "context"
      ? "./last-run-context.json"
      : "./last-run.json",
  import.meta.url
)

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

/** Peak RSS of `pid` while the service flows run, sampled every 100 ms. */
const sampleRss = (pid: number | undefined) => {
  let peak: number | undefined
  const sample = () =>
    void rssBytes(pid).then((bytes) => {
      if (bytes !== undefined) peak = Math.max(peak ?? 0, bytes)
    })
  sample()
  const timer = setInterval(sample, 100)
  return {
    stop: () => {
      clearInterval(timer)
      return peak
    }
  }
}

const page = await serveLocalPage()
// The service's own spans: its side of each phase (a service the bench starts exports them here).
const collector = await startCollector()
let service: TargetService | undefined
const cleanUp = async () => {
  await service?.stop()
  await page.close()
  await collector.close()
}

// Pool browsers run in their own process groups: a Ctrl-C must close the
// service's scope, or they would outlive us.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping the service`)
    void cleanUp().finally(() => process.exit(130))
  })
}

try {
  if (benchUrl !== undefined && benchUrl !== "") {
    service = external(benchUrl)
  } else if (process.env.BENCH_SERVICE !== "in-process") {
    // As `npm start` runs it (the default): the bench's client and the service do not share one
    // event loop. `BENCH_SERVICE=in-process` builds the service in the bench's own process instead.
    log(`starting the service in a child process (pool of ${poolSize})`)
    service = await startChildProcess(
      {
        BROWSER_POOL_SIZE: String(poolSize),
        MAX_BROWSERS: String(DENSITY_CAPACITY),
        MAX_CONTEXTS: String(DENSITY_CAPACITY * 4),
        LIMIT_SESSION_CREATES_PER_MINUTE: "1000000",
        LIMIT_CONCURRENT_SESSIONS: "1000",
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint
      },
      process.env.CHROME_PATH
    )
  } else {
    log(`starting the service in-process (pool of ${poolSize})`)
    service = await startInProcess(poolSize, process.env.CHROME_PATH, collector.endpoint)
  }
  const { baseUrl } = service
  await waitForService(baseUrl, false)
  const key = await signUp(baseUrl)
  // BENCH_EXTENSION_ZIP: every create loads this extension (uploaded once to the bench's account).
  if (process.env.BENCH_EXTENSION_ZIP)
    createBody.extensions = [await uploadExtension(baseUrl, key, process.env.BENCH_EXTENSION_ZIP)]
  const target: ServiceTarget = { baseUrl, key, pageUrl: page.url }

  // Waits out the pool's refills, so no phase pays for the previous phase's launches.
  const settle = async () => {
    if (service?.kind === "in-process") return void (await waitForService(baseUrl, true))
    await waitForService(baseUrl, true, 30_000).catch(() =>
      log("pool did not fill within 30 s; measuring anyway")
    )
  }

  log("warm-up: one service and one baseline session (not counted)")
  await serviceIteration(target)
  await baselineIteration(page.url)
  await settle()
  const rssAfterWarmUp = await rssBytes(service.pid)

  // The service's own share of a context session: beside a bare Chromium with its context made ahead.
  log(
    `share: ${shareSessions} context sessions back to back, then ${concurrency} at once, each beside a bare Chromium's`
  )
  const floor = await startFloor()
  // Beside the service's own Postgres; a server the bench cannot make a database on goes without it.
  const roundTripFloor = await startRoundTripFloor(service.dataDir).catch((error: unknown) => {
    log(`the round trips' floor is left out: ${String(error)}`)
    return undefined
  })
  let share: Array<ReturnType<typeof summarizeShare>> = []
  let shareBudget: Array<ReturnType<typeof shareChecks>> = []
  let sharePhases: ReturnType<typeof phaseTimes> = {}
  try {
    const shareService = () => shareServiceIteration(baseUrl, key, page.url)
    await shareService()
    await floor.iteration(await floor.ahead(), page.url)
    await settle()
    const shareFrom = Date.now()
    const back = summarizeShare(
      "share, back to back",
      await shareSequential(shareSessions, floor, shareService, page.url, roundTripFloor)
    )
    await sleep(2_500)
    const shareSpans = collector.spansBetween(shareFrom, Date.now())
    sharePhases = phaseTimes(shareSpans)
    if (process.env.BENCH_SPANS === "tree")
      for (const [name, matches] of [
        ["create", serverSpan("POST", /^\/v1\/sessions$/)],
        ["get", serverSpan("GET", /^\/v1\/sessions\/[^/]+$/)],
        ...PHASES.filter((candidate) => candidate.onPath).map((phase) => [phase.name, phase.matches] as const)
      ] as const)
        log(renderMedianTree(shareSpans, name, matches))
    await settle()
    const atOnce = summarizeShare(
      `share, ${concurrency} at once`,
      await shareConcurrent(concurrency, concurrentIterations, floor, shareService, page.url)
    )
    share = [back, atOnce]
    shareBudget = [
      shareChecks(back, readShareBudget(), BUDGET_SLACK, false),
      shareChecks(atOnce, { share: readShareBudget().share! }, BUDGET_SLACK, true)
    ]
  } finally {
    await floor.close()
    await roundTripFloor?.close()
  }
  const shareReport = [
    ...share.map((summary, i) => renderShare(summary, shareBudget[i]!)),
    `service-side phases of the share's back-to-back sessions (p50 / p95 ms): ${Object.entries(sharePhases)
      .map(([phase, s]) => `${phase} ${s.p50.toFixed(2)} / ${s.p95.toFixed(2)}`)
      .join(", ")}`,
    `share budget (bench/budget.json's shareMs): ${shareBudget.every((checks) => checks.every((check) => check.ok)) ? "PASS" : "FAIL"}`
  ].join("\n")
  if (only === "share") {
    console.log(shareReport)
    await Fs.writeFile(
      new URL("./last-run-share.json", import.meta.url),
      `${JSON.stringify({ finishedAt: new Date().toISOString(), share, shareBudget, sharePhases }, null, 2)}\n`
    )
    await cleanUp()
    process.exit(0)
  }

  log(`settled: ${settledSessions} sessions, one at a time on a quiet machine`)
  const settledSamples: Array<Partial<Record<SettledPhase, number>>> = []
  const settledFrom = Date.now()
  for (let i = 0; i < settledSessions; i++)
    settledSamples.push(await settledIteration(baseUrl, key, service.dataDir, i))
  if (process.env.BENCH_SPANS === "tree") {
    await sleep(1_500)
    const spans = collector.spansBetween(settledFrom, Date.now())
    log(renderMedianTree(spans, "settled GET", serverSpan("GET", /^\/v1\/sessions\/[^/]+$/)))
    log(renderMedianTree(spans, "settled DELETE", serverSpan("DELETE", /^\/v1\/sessions\/[^/]+$/)))
  }
  const settled = Object.fromEntries(
    SETTLED_PHASES.flatMap((phase) => {
      const values = settledSamples.flatMap((sample) => (sample[phase] === undefined ? [] : [sample[phase]!]))
      return values.length === 0 ? [] : [[phase, stats(values)]]
    })
  )

  log(`sequential: ${iterations} sessions each`)
  const rssSequential = sampleRss(service.pid)
  const acquiresBeforeSequential = await acquires(baseUrl)
  const serviceSequential = await runSequential(iterations, () => serviceIteration(target), baseUrl)
  const warmSequential = warmHitRate(acquiresBeforeSequential, await acquires(baseUrl))
  const rssPeakSequential = rssSequential.stop()
  await settle()
  const baselineSequential = await runSequential(iterations, () => baselineIteration(page.url))

  log(`concurrent: ${concurrency} clients x ${concurrentIterations} sessions each`)
  await settle()
  const rssConcurrent = sampleRss(service.pid)
  const acquiresBeforeConcurrent = await acquires(baseUrl)
  const serviceConcurrent = await runConcurrent(concurrency, concurrentIterations, () =>
    serviceIteration(target)
  )
  const warmConcurrent = warmHitRate(acquiresBeforeConcurrent, await acquires(baseUrl))
  const rssPeakConcurrent = rssConcurrent.stop()
  await settle()
  const baselineConcurrent = await runConcurrent(concurrency, concurrentIterations, () =>
    baselineIteration(page.url)
  )

  log(`paced: ${pacedSessions} sessions, one every ${pacedIntervalMs} ms`)
  await settle()
  const acquiresBeforePaced = await acquires(baseUrl)
  const pacedFrom = Date.now()
  const servicePaced = await runArrivals(pacedSessions, pacedIntervalMs, () => serviceIteration(target))
  const warmPaced = warmHitRate(acquiresBeforePaced, await acquires(baseUrl))
  // Spans leave every second; the last teardown may still be running.
  await sleep(2_500)
  const pacedSpans = collector.spansBetween(pacedFrom, Date.now())
  const pacedPhases = phaseTimes(pacedSpans)
  if (process.env.BENCH_SPANS === "1") log(renderSpans(pacedSpans))
  if (process.env.BENCH_SPANS === "tree")
    for (const phase of PHASES.filter((candidate) => candidate.onPath))
      log(renderMedianTree(pacedSpans, phase.name))
  await settle()
  const baselinePaced = await runArrivals(pacedSessions, pacedIntervalMs, () => baselineIteration(page.url))

  // What a session's log costs a lifecycle: sessions one at a time, each started on a quiet machine
  // (the pool full, nothing launching), alternating between logs on (the default) and `logs: false`,
  // so both meet the same machine and neither waits on a launch the other caused. Paced arrivals
  // measured the pool's queue instead: at one every 500 ms a pool of 2 runs dry, and the ready wait
  // (seconds) drowned the log's few milliseconds.
  let logsCost:
    { readonly on: ReturnType<typeof summarize>; readonly off: ReturnType<typeof summarize> } | undefined
  if (createBody.logs === undefined) {
    log(`logs on and off by turns: ${logsSessions * 2} sessions, one at a time on a quiet machine`)
    const on: Array<Awaited<ReturnType<typeof serviceIteration>>> = []
    const off: typeof on = []
    const startedAt = performance.now()
    for (let turn = 0; turn < logsSessions * 2; turn++) {
      await settle()
      await sleep(300)
      const withLogs = turn % 2 === 0
      if (!withLogs) createBody.logs = false
      const sample = serviceIteration(target)
      // Read at the create, the first step.
      await sleep(0)
      delete createBody.logs
      ;(withLogs ? on : off).push(await sample)
    }
    const wallMs = performance.now() - startedAt
    logsCost = {
      on: summarize(SERVICE_PHASES, { wallMs, samples: on, poolIdleAtStart: [] }),
      off: summarize(SERVICE_PHASES, { wallMs, samples: off, poolIdleAtStart: [] })
    }
  }

  const openCount = Math.max(1, Math.round((openRatePerMinute * openSeconds) / 60))
  const openIntervalMs = 60_000 / openRatePerMinute
  log(`open loop: ${openRatePerMinute} sessions a minute for ${openSeconds} s, each held ${openHoldMs} ms`)
  await settle()
  const rssOpen = sampleRss(service.pid)
  const memoryPerSession: Array<number> = []
  let openInFlight = 0
  const poolTrace: Array<{
    at: number
    inFlight: number
    idle?: number
    target?: number
    browsers: number | undefined
  }> = []
  const openStart = performance.now()
  const memoryTimer = setInterval(() => {
    const live = openInFlight
    if (live > 0) void chromiumMemory().then((bytes) => memoryPerSession.push(bytes / live))
    void Promise.all([readyz(baseUrl), browserCount(baseUrl)]).then(([pool, browsers]) => {
      const point = { at: Math.round(performance.now() - openStart), inFlight: live, ...pool, browsers }
      poolTrace.push(point)
      if (process.env.BENCH_TRACE === "1") log(`pool ${JSON.stringify(point)}`)
    })
  }, 1000)
  const acquiresBeforeOpen = await acquires(baseUrl)
  const serviceOpen = await runArrivals(
    openCount,
    openIntervalMs,
    holdServiceIteration(target, openHoldMs),
    (inFlight) => (openInFlight = inFlight)
  )
  clearInterval(memoryTimer)
  const warmOpen = warmHitRate(acquiresBeforeOpen, await acquires(baseUrl))
  const rssPeakOpen = rssOpen.stop()
  await settle()
  const baselineOpen = await runArrivals(openCount, openIntervalMs, holdBaselineIteration(openHoldMs))

  // Density: both kinds in this run, so their memory is compared on one machine state.
  const density: Array<DensityResult> = []
  if (densityMax > 0) {
    const floor = Math.max(2 * 2 ** 30, Os.totalmem() * 0.15)
    for (const kind of densityKinds) {
      log(
        `density: ${kind} sessions opened one at most every ${densityIntervalMs} ms and left open, until create-to-ready p95 (last ${WINDOW}) passes ${READY_P95_LIMIT_MS} ms, MemAvailable < ${mb(floor)} or ${densityMax} are open`
      )
      await settle()
      density.push(
        await ramp({
          baseUrl,
          key,
          pageUrl: page.url,
          kind,
          max: densityMax,
          intervalMs: densityIntervalMs,
          memoryFloorBytes: floor,
          log
        })
      )
      // Deleted sessions' browsers exit, and an idle shared browser closes, before the next kind starts.
      await sleep(5000)
    }
  }

  const sequential = compare(
    "sequential",
    summarize(SERVICE_PHASES, serviceSequential),
    summarize(BASELINE_PHASES, baselineSequential)
  )
  const concurrent = compare(
    `concurrent x${concurrency}`,
    summarize(SERVICE_PHASES, serviceConcurrent),
    summarize(BASELINE_PHASES, baselineConcurrent)
  )
  const paced = compare(
    `paced every ${pacedIntervalMs} ms`,
    summarize(SERVICE_PHASES, servicePaced),
    summarize(BASELINE_PHASES, baselinePaced)
  )
  // The paced mode's phases against their budget; a capture's beside the direct launch's own.
  const phaseBudget = budgetChecks(
    pacedPhases,
    readBudget(),
    Object.fromEntries(Object.entries(paced.baseline.phases).map(([name, stats]) => [name, stats?.p50]))
  )
  const open = compare(
    `open loop ${openRatePerMinute}/min`,
    summarize(HOLD_PHASES, serviceOpen),
    summarize(HOLD_BASELINE_PHASES, baselineOpen)
  )
  const warmRates = {
    sequential: warmSequential,
    concurrent: warmConcurrent,
    paced: warmPaced,
    open: warmOpen
  }
  const memoryPerLiveSession = memoryPerSession.length === 0 ? undefined : stats(memoryPerSession).p50
  const warmReadyMs = serviceSequential.samples
    .filter((_, i) => (serviceSequential.poolIdleAtStart[i] ?? 0) > 0)
    .map((sample) => sample.ready)
  const result = verdict(
    { sequential, concurrent, paced, open, settled },
    isolation === "context" ? CONTEXT_TARGETS : TARGETS
  )
  const warmReady = warmReadyMs.length === 0 ? undefined : stats(warmReadyMs)
  const rssOwner = service.kind === "in-process" ? "service + bench process" : "service process"

  console.log(
    [
      "",
      `session lifecycle: ${isolation} sessions, ${service.kind} service at ${baseUrl}, ${Os.cpus().length} CPUs, node ${process.version}`,
      "",
      shareReport,
      "",
      `settled (${settledSessions} sessions, each step on a quiet machine), p50 / p95 ms: ${Object.entries(
        settled
      )
        .map(([phase, s]) => `${phase} ${s.p50.toFixed(1)} / ${s.p95.toFixed(1)}`)
        .join(", ")}`,
      "",
      renderMode(sequential),
      `warm pool before ${warmReadyMs.length} of ${iterations} sequential creates; ready on those: ` +
        (warmReady === undefined
          ? "n/a"
          : `p50 ${warmReady.p50.toFixed(1)} ms, p95 ${warmReady.p95.toFixed(1)} ms`),
      "",
      renderMode(concurrent),
      "",
      renderMode(paced),
      service.kind !== "external"
        ? renderPhases(`paced every ${pacedIntervalMs} ms`, pacedPhases, phaseBudget)
        : "service-side phases: only for a service the bench starts (its spans come to the bench)",
      ...(logsCost === undefined ? [] : ["", renderLogsCost(logsCost.on, logsCost.off)]),
      "",
      renderMode(open),
      `open loop create-to-ready p50 / p95 / p99: ${open.service.phases.ready!.p50.toFixed(1)} / ${open.service.phases.ready!.p95.toFixed(1)} / ${open.service.phases.ready!.p99.toFixed(1)} ms; direct launch ${open.baseline.phases.launch!.p50.toFixed(1)} / ${open.baseline.phases.launch!.p95.toFixed(1)} / ${open.baseline.phases.launch!.p99.toFixed(1)} ms`,
      `browser memory per live session (PSS of the service's Chromiums, warm ones included / sessions open, p50 of 1 s samples): ${mb(memoryPerLiveSession)}`,
      "",
      `warm-hit rate (rbs_browser_pool_acquires_total): ${Object.entries(warmRates)
        .map(([mode, rate]) => `${mode} ${rate === undefined ? "n/a" : `${Math.round(rate * 100)}%`}`)
        .join(", ")}`,
      `RSS (${rssOwner}): after warm-up ${mb(rssAfterWarmUp)}, peak sequential ${mb(rssPeakSequential)}, peak concurrent ${mb(rssPeakConcurrent)}, peak open loop ${mb(rssPeakOpen)}`,
      `503 capacity_exhausted answers met (each retried after Retry-After, inside its create-to-ready): ${capacityRefusals.count}`,
      ...density.map(renderDensity),
      ...densityVerdict(density),
      result.line,
      ""
    ].join("\n")
  )

  const report = {
    finishedAt: new Date().toISOString(),
    service: { kind: service.kind, baseUrl, poolSize: service.kind === "in-process" ? poolSize : null },
    isolation,
    machine: { cpus: Os.cpus().length, node: process.version },
    counts: {
      iterations,
      concurrency,
      concurrentIterations,
      pacedSessions,
      pacedIntervalMs,
      openRatePerMinute,
      openSeconds,
      openHoldMs
    },
    modes: { sequential, concurrent, paced, open },
    settled,
    share: { modes: share, budget: shareBudget, phases: sharePhases },
    pacedPhases: { times: pacedPhases, budget: phaseBudget },
    logsCost: logsCost === undefined ? null : { on: logsCost.on.phases, off: logsCost.off.phases },
    warmHitRate: warmRates,
    openLoopPoolTrace: poolTrace,
    memoryPerLiveSessionBytes: memoryPerLiveSession,
    poolIdleAtSequentialStart: serviceSequential.poolIdleAtStart,
    rssBytes: {
      owner: rssOwner,
      afterWarmUp: rssAfterWarmUp,
      peakSequential: rssPeakSequential,
      peakConcurrent: rssPeakConcurrent,
      peakOpenLoop: rssPeakOpen
    },
    capacityRefusals: capacityRefusals.count,
    density,
    verdict: result
  }
  await Fs.writeFile(resultFile, `${JSON.stringify(report, null, 2)}\n`)
  log(`results written to ${resultFile.pathname}`)
} finally {
  log("stopping")
  await cleanUp()
}
