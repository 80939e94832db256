// Launch time of a pool browser (spawn to a browser ready for a session: the
// DevTools endpoint, the control connection, the window sized), for launch-flag
// variants one at a time, interleaved round by round so each variant sees the
// same machine. Runs through the service's own jail (its user, cgroup, sandbox).
// See bench/README.md.
import { Effect, Layer } from "effect"
import { rmSync } from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Chromium from "../../src/browser/Chromium.ts"
import { BrowserIsolation } from "../../src/browser/Isolation.ts"
import { ServiceConfig } from "../../src/Config.ts"

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 12)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

/** Each variant adds switches to the service's defaults; `defaults` adds none. */
const VARIANTS: Record<string, ReadonlyArray<string>> = {
  defaults: [],
  "no crash reporter": ["--disable-breakpad", "--disable-crash-reporter"],
  "fewer background services": [
    "--disable-client-side-phishing-detection",
    "--disable-hang-monitor",
    "--disable-domain-reliability",
    "--disable-field-trial-config",
    "--no-service-autorun"
  ],
  "no GPU process": ["--disable-software-rasterizer", "--disable-features=Vulkan", "--in-process-gpu"]
}

const dataDir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-launch-"))
await Fs.chmod(dataDir, 0o755)
process.on("exit", () => rmSync(dataDir, { recursive: true, force: true }))

const percentile = (values: ReadonlyArray<number>, p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)]!

const processCount = (leader: number) =>
  Effect.promise(async () => {
    let count = 0
    for (const entry of await Fs.readdir("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      const stat = await Fs.readFile(`/proc/${entry}/stat`, "utf8").catch(() => "")
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]) === leader) count++
    }
    return count
  })

const program = Effect.gen(function* () {
  const isolation = yield* BrowserIsolation
  const config = yield* ServiceConfig
  const times: Record<string, Array<number>> = Object.fromEntries(Object.keys(VARIANTS).map((v) => [v, []]))
  const processes: Record<string, number> = {}
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, extraArgs] of Object.entries(VARIANTS)) {
      yield* Effect.scoped(
        Effect.gen(function* () {
          const started = performance.now()
          const jail = yield* isolation.enter()
          const browser = yield* Chromium.launch({
            chromePath: config.chromePath,
            profilesDir: isolation.info.profilesDir,
            jail,
            width: 1280,
            height: 720,
            extraArgs
          })
          times[name]!.push(performance.now() - started)
          // Settled: what the browser runs once it is idle in the pool.
          yield* Effect.sleep("300 millis")
          processes[name] = yield* processCount(browser.pid)
        })
      )
    }
    log(`round ${round + 1} of ${ROUNDS}`)
  }
  const rows = Object.keys(VARIANTS).map((name) => {
    const values = times[name]!
    return `${name.padEnd(28)} ${percentile(values, 50).toFixed(0).padStart(6)} ms ${percentile(values, 95).toFixed(0).padStart(6)} ms  ${String(processes[name]).padStart(3)} processes`
  })
  console.log(
    [
      "",
      `browser launch (spawn to ready for a session), ${ROUNDS} rounds, ${Os.cpus().length} CPUs, ${isolation.info.user} user, limits ${isolation.info.limits}`,
      `${"variant".padEnd(28)} ${"p50".padStart(9)} ${"p95".padStart(9)}`,
      ...rows,
      ""
    ].join("\n")
  )
})

await Effect.runPromise(
  program.pipe(
    Effect.provide(
      BrowserIsolation.layer.pipe(Layer.provideMerge(ServiceConfig.layer({ dataDir, logLevel: "Warn" })))
    ),
    Effect.scoped
  )
)
