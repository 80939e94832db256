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
import { serveLocalPage } from "./LocalPage.ts"
import { compare, mb, renderMode, stats, summarize, verdict } from "./Report.ts"
import {
  external,
  rssBytes,
  signUp,
  startInProcess,
  type TargetService,
  waitForService
} from "./TargetService.ts"

const intFromEnv = (name: string, fallback: number, minimum: number) => {
  const raw = process.env[name]
  if (raw === undefined || raw === "") return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < minimum)
    throw new Error(`${name} must be an integer >= ${minimum}, got ${raw}`)
  return value
}

const iterations = intFromEnv("BENCH_ITERATIONS", 20, 1)
const concurrency = intFromEnv("BENCH_CONCURRENCY", 5, 1)
const concurrentIterations = intFromEnv("BENCH_CONCURRENT_ITERATIONS", 4, 1)
const poolSize = intFromEnv("BROWSER_POOL_SIZE", 2, 0)
const benchUrl = process.env.BENCH_URL
const resultFile = new URL("./last-run.json", import.meta.url)

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
let service: TargetService | undefined
const cleanUp = async () => {
  await service?.stop()
  await page.close()
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
  } else {
    log(`starting the service in-process (pool of ${poolSize})`)
    service = await startInProcess(poolSize, process.env.CHROME_PATH)
  }
  const { baseUrl } = service
  await waitForService(baseUrl, false)
  const key = await signUp(baseUrl)
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

  log(`sequential: ${iterations} sessions each`)
  const rssSequential = sampleRss(service.pid)
  const serviceSequential = await runSequential(iterations, () => serviceIteration(target), baseUrl)
  const rssPeakSequential = rssSequential.stop()
  await settle()
  const baselineSequential = await runSequential(iterations, () => baselineIteration(page.url))

  log(`concurrent: ${concurrency} clients x ${concurrentIterations} sessions each`)
  await settle()
  const rssConcurrent = sampleRss(service.pid)
  const serviceConcurrent = await runConcurrent(concurrency, concurrentIterations, () =>
    serviceIteration(target)
  )
  const rssPeakConcurrent = rssConcurrent.stop()
  await settle()
  const baselineConcurrent = await runConcurrent(concurrency, concurrentIterations, () =>
    baselineIteration(page.url)
  )

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
  const warmReadyMs = serviceSequential.samples
    .filter((_, i) => (serviceSequential.poolIdleAtStart[i] ?? 0) > 0)
    .map((sample) => sample.ready)
  const result = verdict(warmReadyMs, [sequential, concurrent])
  const warmReady = warmReadyMs.length === 0 ? undefined : stats(warmReadyMs)
  const rssOwner = service.kind === "in-process" ? "service + bench process" : "service process"

  console.log(
    [
      "",
      `session lifecycle: ${service.kind} service at ${baseUrl}, ${Os.cpus().length} CPUs, node ${process.version}`,
      "",
      renderMode(sequential),
      `warm pool before ${warmReadyMs.length} of ${iterations} sequential creates; ready on those: ` +
        (warmReady === undefined
          ? "n/a"
          : `p50 ${warmReady.p50.toFixed(1)} ms, p95 ${warmReady.p95.toFixed(1)} ms`),
      "",
      renderMode(concurrent),
      "",
      `RSS (${rssOwner}): after warm-up ${mb(rssAfterWarmUp)}, peak sequential ${mb(rssPeakSequential)}, peak concurrent ${mb(rssPeakConcurrent)}`,
      result.line,
      ""
    ].join("\n")
  )

  const report = {
    finishedAt: new Date().toISOString(),
    service: { kind: service.kind, baseUrl, poolSize: service.kind === "in-process" ? poolSize : null },
    machine: { cpus: Os.cpus().length, node: process.version },
    counts: { iterations, concurrency, concurrentIterations },
    modes: { sequential, concurrent },
    poolIdleAtSequentialStart: serviceSequential.poolIdleAtStart,
    rssBytes: {
      owner: rssOwner,
      afterWarmUp: rssAfterWarmUp,
      peakSequential: rssPeakSequential,
      peakConcurrent: rssPeakConcurrent
    },
    verdict: result
  }
  await Fs.writeFile(resultFile, `${JSON.stringify(report, null, 2)}\n`)
  log(`results written to ${resultFile.pathname}`)
} finally {
  log("stopping")
  await cleanUp()
}
