// Sandbox sessions through the real service: create to ready with a warm
// pool and with a cold launch, an exec round trip beside a host spawn in the
// same run, a PTY keystroke's echo, and a 16 MiB upload and download. See
// bench/README.md.
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Prettier from "prettier"
import { stats } from "../session-lifecycle/Report.ts"
import { intFromEnv, signUp, sleep } from "../session-lifecycle/TargetService.ts"
import { createSandbox, deleteSession, execTrue, open, ptyEcho, type Target, transfer } from "./Probes.ts"
import {
  external,
  sandboxAcquires,
  type SandboxService,
  startInProcess,
  waitForPool
} from "./SandboxService.ts"
import { latencyRow, mbps, table, verdict } from "./Report.ts"
import { spawnTrue, startSpawner } from "./SpawnTrue.ts"

const warmUps = intFromEnv("BENCH_WARMUP", 5, 0)
const creates = intFromEnv("BENCH_CREATES", 40)
const execs = intFromEnv("BENCH_EXECS", 500)
const keystrokes = intFromEnv("BENCH_KEYSTROKES", 200)
const transfers = intFromEnv("BENCH_TRANSFERS", 5)
const poolSize = intFromEnv("SANDBOX_POOL_SIZE", 2, 1)
const diskMb = intFromEnv("SANDBOX_DISK_MB", 2048, 0)
const benchUrl = process.env.BENCH_URL
const resultFile = new URL("./last-run.json", import.meta.url)
const TRANSFER_BYTES = 16 * 1024 * 1024

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

let service: SandboxService | undefined
let target: Target | undefined
const cleanUp = async () => {
  const current = target
  if (current !== undefined)
    for (const id of [...open]) await deleteSession(current, id).catch((error) => log(String(error)))
  await service?.stop()
}

// Sandboxes are runc containers outside our process tree: a Ctrl-C must close the service's scope.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    log(`${signal}: deleting the bench's sessions and stopping the service`)
    void cleanUp().finally(() => process.exit(130))
  })
}

/** The pool back at its target (every warm sandbox launched), then a moment for the last teardown's tail. */
const quiet = async (baseUrl: string) => {
  const pool =
    service?.kind === "in-process"
      ? await waitForPool(baseUrl, true)
      : await waitForPool(baseUrl, true, 30_000).catch(() => {
          log("sandbox pool did not fill within 30 s; measuring anyway")
          return waitForPool(baseUrl, false)
        })
  await sleep(300)
  return pool
}

/** `creates` sandboxes of `image`, one at a time, each created with the pool full and deleted. */
const createRound = async (t: Target, image: string | undefined) => {
  const samples: Array<{ create: number; ready: number; delete: number; idleBefore: number }> = []
  const before = await sandboxAcquires(t.baseUrl)
  for (let i = 0; i < creates; i++) {
    const pool = await quiet(t.baseUrl)
    const { id, create, ready } = await createSandbox(t, image)
    samples.push({ create, ready, delete: await deleteSession(t, id), idleBefore: pool.idle })
  }
  const after = await sandboxAcquires(t.baseUrl)
  return {
    samples,
    acquires: { warm: after.warm - before.warm, cold: after.cold - before.cold },
    ready: stats(samples.map((s) => s.ready)),
    create: stats(samples.map((s) => s.create)),
    delete: stats(samples.map((s) => s.delete))
  }
}

try {
  if (benchUrl !== undefined && benchUrl !== "") {
    service = external(benchUrl, process.env.BENCH_COLD_IMAGE || undefined)
  } else {
    log(`starting the service in-process (no browsers, ${poolSize} warm sandboxes, disks of ${diskMb} MB)`)
    service = await startInProcess(poolSize, diskMb, log)
  }
  const { baseUrl } = service
  const startPool = await waitForPool(baseUrl, false)
  if (startPool.capacity === 0) throw new Error(`${baseUrl} runs no sandboxes (sandbox_pool capacity 0)`)
  const key = await signUp(baseUrl)
  target = { baseUrl, key }
  const t = target

  // A service that has run a while has its create path compiled: the first creates of a fresh process are
  // slower, and would measure the JIT instead.
  log(`warm-up: ${warmUps} sandboxes of each kind, created, exec'd and deleted (not counted)`)
  for (let i = 0; i < warmUps; i++) {
    for (const image of service.coldImage === undefined ? [undefined] : [undefined, service.coldImage]) {
      await quiet(baseUrl)
      const warmUp = await createSandbox(t, image)
      await execTrue(t, warmUp.id)
      await deleteSession(t, warmUp.id)
    }
  }

  log(`create to ready, warm pool: ${creates} creates, each with the pool full`)
  const warm = await createRound(t, undefined)
  const coldImage = service.coldImage
  let cold: Awaited<ReturnType<typeof createRound>> | undefined
  if (coldImage === undefined) {
    log("create to ready, cold: skipped (set BENCH_COLD_IMAGE to an image other than the node's default)")
  } else {
    log(`create to ready, cold launch: ${creates} creates of image "${coldImage}"`)
    cold = await createRound(t, coldImage)
  }

  log(`exec round trip: ${execs} execs of ["true"], each beside two host spawn("true")s`)
  await quiet(baseUrl)
  const session = await createSandbox(t)
  const spawner = startSpawner()
  const execMs: Array<number> = []
  const spawnMs: Array<number> = []
  const bareSpawnMs: Array<number> = []
  const rssBytes = process.memoryUsage().rss
  try {
    const probes = [
      async () => execMs.push(await execTrue(t, session.id)),
      async () => spawnMs.push(await spawnTrue()),
      async () => bareSpawnMs.push(await spawner.next())
    ]
    for (let i = 0; i < 10; i++) for (const probe of probes) await probe()
    execMs.length = spawnMs.length = bareSpawnMs.length = 0
    // Turn about, so none always runs right after another.
    for (let i = 0; i < execs; i++)
      for (let j = 0; j < probes.length; j++) await probes[(i + j) % probes.length]!()
  } finally {
    await spawner.stop()
  }
  const exec = stats(execMs)
  const spawned = stats(spawnMs)
  const bareSpawned = stats(bareSpawnMs)

  log(`PTY echo: ${keystrokes} keystrokes`)
  const echoMs = await ptyEcho(t, session.id, keystrokes)
  const echo = stats(echoMs)

  log(`transfers: ${transfers} x 16 MiB up and down`)
  const payload = Crypto.randomBytes(TRANSFER_BYTES)
  const transferSamples = []
  for (let i = 0; i < transfers; i++)
    transferSamples.push(await transfer(t, session.id, "bench/upload.bin", payload))
  await deleteSession(t, session.id)
  const throughput = (samples: ReadonlyArray<number>) => {
    const rates = samples.map((millis) => mbps(TRANSFER_BYTES, millis))
    const s = stats(rates)
    return { p50: s.p50, slowest: s.min, fastest: s.max }
  }
  const upload = throughput(transferSamples.map((s) => s.uploadMs))
  const download = throughput(transferSamples.map((s) => s.downloadMs))

  // What is left while the service runs: the pool's warm sandboxes only.
  const endPool = await quiet(baseUrl)
  const leftovers = service.leftovers
  let runningAtEnd: number | undefined
  if (leftovers !== undefined) {
    // A deleted session's container goes a moment after its 204: wait for the pool's warm ones alone.
    const deadline = performance.now() + 10_000
    runningAtEnd = leftovers().containers.length
    while (runningAtEnd > endPool.idle && performance.now() < deadline) {
      await sleep(50)
      runningAtEnd = leftovers().containers.length
    }
  }
  log("stopping the service")
  await service.stop()
  const leftAfterStop = leftovers?.()

  // The verdict's baseline is the bare process's spawn: the bench's own forks a process that holds the
  // whole service (fork copies its page tables), which would flatter the ratio.
  const ratio = exec.p50 / bareSpawned.p50
  const ratioInProcess = exec.p50 / spawned.p50
  const result = verdict({
    warmReadyP50: warm.ready.p50,
    execP50: exec.p50,
    execSpawnRatio: ratio,
    ptyEchoP50: echo.p50
  })
  const hits = (a: { warm: number; cold: number }) => `${a.warm} warm / ${a.cold} cold acquires`
  const rows = [
    latencyRow("create-to-ready, warm pool", warm.ready, creates, hits(warm.acquires)),
    latencyRow("  POST /v1/sessions alone", warm.create, creates),
    latencyRow("  DELETE", warm.delete, creates),
    ...(cold === undefined
      ? []
      : [
          latencyRow("create-to-ready, cold launch", cold.ready, creates, hits(cold.acquires)),
          latencyRow("  POST /v1/sessions alone", cold.create, creates),
          latencyRow("  DELETE", cold.delete, creates)
        ]),
    latencyRow('exec ["true"] round trip', exec, execs, `${ratio.toFixed(2)}x bare spawn p50`),
    latencyRow('host spawn("true"), bare node', bareSpawned, execs, "same run, turn about"),
    latencyRow(
      'host spawn("true"), bench process',
      spawned,
      execs,
      `RSS ${Math.round(rssBytes / 2 ** 20)} MiB; exec ${ratioInProcess.toFixed(2)}x`
    ),
    latencyRow("PTY keystroke echo", echo, keystrokes, "bash readline at the prompt")
  ]
  const transferRow = (name: string, r: { p50: number; slowest: number; fastest: number }) => [
    name,
    String(transfers),
    `${r.p50.toFixed(1)} MB/s`,
    `${r.slowest.toFixed(1)} MB/s`,
    `${r.fastest.toFixed(1)} MB/s`
  ]

  console.log(
    [
      "",
      `sandbox: ${service.kind} service at ${baseUrl}, ${Os.cpus().length} CPUs, node ${process.version}; ` +
        `sandbox pool target ${startPool.target}, capacity ${startPool.capacity}`,
      "",
      table(["measurement", "n", "p50", "p95", "max", "note"], rows),
      "",
      table(
        ["16 MiB transfer", "n", "median", "slowest", "fastest"],
        [transferRow("upload (multipart)", upload), transferRow("download", download)]
      ),
      "(MB/s = 10^6 bytes a second: request sent → response read in full)",
      "",
      cold === undefined
        ? "cold: not measured"
        : `cold = a create naming image "${coldImage}" (the default image's bits under a second name): the pool never ` +
          "keeps it warm, so every such create launches its own sandbox (idmapped mount, overlay, runc run, supervisor hello)",
      leftAfterStop === undefined
        ? "runc: not checked (external service)"
        : `runc --root ${service.runcRoot} list: ${runningAtEnd} running before the stop (the pool holds ${endPool.idle} warm), ` +
          `${leftAfterStop.containers.length} after (the root ${leftAfterStop.runcRoot ? "still there" : "removed"}); ` +
          `mounts left below the data dir: ${leftAfterStop.mounts.length}` +
          [...leftAfterStop.containers, ...leftAfterStop.mounts].map((each) => ` ${each}`).join(""),
      result.line,
      ""
    ].join("\n")
  )

  const report = {
    finishedAt: new Date().toISOString(),
    service: {
      kind: service.kind,
      baseUrl,
      poolSize: service.kind === "in-process" ? poolSize : null,
      diskMb: service.kind === "in-process" ? diskMb : null
    },
    machine: { cpus: Os.cpus().length, node: process.version },
    counts: { warmUps, creates, execs, keystrokes, transfers, transferBytes: TRANSFER_BYTES },
    pool: { atStart: startPool, atEnd: endPool },
    createToReady: {
      warm,
      cold: cold === undefined ? null : { image: coldImage, ...cold }
    },
    exec: {
      service: exec,
      hostSpawnBare: bareSpawned,
      hostSpawnBenchProcess: { ...spawned, rssBytes },
      ratioP50: { bare: ratio, benchProcess: ratioInProcess },
      samples: { exec: execMs, spawnBare: bareSpawnMs, spawnBenchProcess: spawnMs }
    },
    ptyEcho: { stats: echo, samples: echoMs },
    transfer: { uploadMBps: upload, downloadMBps: download, samples: transferSamples },
    runc: {
      root: service.runcRoot ?? null,
      runningBeforeStop: runningAtEnd ?? null,
      afterStop: leftAfterStop ?? null
    },
    verdict: result
  }
  // Formatted as `npm run format` would, so a run leaves `format:check` passing.
  const options = await Prettier.resolveConfig(resultFile)
  await Fs.writeFile(
    resultFile,
    await Prettier.format(JSON.stringify(report), { ...options, parser: "json" })
  )
  log(`results written to ${resultFile.pathname}`)
  if (leftAfterStop !== undefined && leftAfterStop.containers.length + leftAfterStop.mounts.length > 0)
    process.exitCode = 1
} finally {
  await cleanUp()
}
