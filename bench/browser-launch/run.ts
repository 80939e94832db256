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
import * as Chromium from "../../src/runtimes/browser/Chromium.ts"
import { BrowserIsolation } from "../../src/runtimes/browser/Isolation.ts"
import { ServiceConfig } from "../../src/platform/config/Config.ts"
import { BrowserConfig } from "../../src/runtimes/browser/BrowserConfig.ts"

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 12)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

/** Each variant adds switches to the service's defaults; `defaults` adds none. */
const VARIANTS: Record<string, { readonly args: ReadonlyArray<string>; readonly template?: boolean }> = {
  defaults: { args: [] },
  "no crash reporter": { args: ["--disable-breakpad", "--disable-crash-reporter"] },
  "fewer background services": {
    args: [
      "--disable-client-side-phishing-detection",
      "--disable-hang-monitor",
      "--disable-domain-reliability",
      "--disable-field-trial-config",
      "--no-service-autorun"
    ]
  },
  "no GPU process": {
    args: ["--disable-software-rasterizer", "--disable-features=Vulkan", "--in-process-gpu"]
  },
  // The profile a first run writes (Local State, Default/Preferences, ...), copied in before the launch.
  "profile template": { args: [], template: true }
}

/** What a first run leaves that a copy must not carry: its locks, its port, its caches. */
const NOT_IN_TEMPLATE = new Set([
  "SingletonLock",
  "SingletonSocket",
  "SingletonCookie",
  "DevToolsActivePort",
  "Cache",
  "Code Cache",
  "GPUCache",
  "ShaderCache",
  "GrShaderCache",
  "GraphiteDawnCache",
  "Crashpad"
])

/** Copies `from` into `to` (both existing dirs), owned by `uid` when given. */
const copyProfile = async (from: string, to: string, uid: number | null): Promise<void> => {
  for (const entry of await Fs.readdir(from, { withFileTypes: true })) {
    if (NOT_IN_TEMPLATE.has(entry.name)) continue
    const source = Path.join(from, entry.name)
    const target = Path.join(to, entry.name)
    if (entry.isDirectory()) {
      await Fs.mkdir(target, { mode: 0o700 })
      await copyProfile(source, target, uid)
    } else if (entry.isFile()) {
      await Fs.copyFile(source, target)
    } else continue
    if (uid !== null) await Fs.chown(target, uid, uid)
  }
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
  // The template: a profile one launch wrote, left idle for two seconds first.
  const template = Path.join(dataDir, "template")
  yield* Effect.scoped(
    Effect.gen(function* () {
      const jail = yield* isolation.enter()
      yield* Chromium.launch({
        chromePath: config.chromePath,
        profilesDir: isolation.info.profilesDir,
        jail,
        width: 1280,
        height: 720
      })
      yield* Effect.sleep("2 seconds")
      yield* Effect.promise(() =>
        Fs.cp(jail.profileDir, template, { recursive: true, verbatimSymlinks: true })
      )
    })
  )
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, variant] of Object.entries(VARIANTS)) {
      yield* Effect.scoped(
        Effect.gen(function* () {
          const started = performance.now()
          const jail = yield* isolation.enter()
          if (variant.template === true)
            yield* Effect.promise(() => copyProfile(template, jail.profileDir, jail.uid))
          const browser = yield* Chromium.launch({
            chromePath: config.chromePath,
            profilesDir: isolation.info.profilesDir,
            jail,
            width: 1280,
            height: 720,
            extraArgs: variant.args
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
      BrowserIsolation.layer.pipe(
        Layer.provideMerge(BrowserConfig.layer),
        Layer.provideMerge(ServiceConfig.layer({ dataDir, logLevel: "Warn" }))
      )
    ),
    Effect.scoped
  )
)
