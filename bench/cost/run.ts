// Where the CPU of a session goes, by part, beside a Chromium launched
// directly doing the same work, in one run, read from the kernel's cpuacct
// groups (exact, exited processes included). See bench/README.md.
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Prettier from "prettier"
import puppeteer, { type Browser, type Page } from "puppeteer-core"
import * as Cell from "../../src/runtimes/browser/Cell.ts"
import { defaultFlags, executableOf } from "../../src/runtimes/browser/Chromium.ts"
import * as Spawner from "../../src/runtimes/browser/Spawner.ts"
import { DEFAULT_HEIGHT, DEFAULT_WIDTH } from "../../src/runtimes/browser/PoolLauncher.ts"
import { DIRECT_ARGS } from "../session-lifecycle/Lifecycle.ts"
import { serveLocalPage } from "../session-lifecycle/LocalPage.ts"
import {
  call,
  createSession,
  intFromEnv,
  json,
  signUp,
  sleep,
  startChildProcess,
  type TargetService
} from "../session-lifecycle/TargetService.ts"
import * as Cpuacct from "./Cpuacct.ts"
import { type Jails, openJails } from "./Jails.ts"
import * as PgStats from "./PgStats.ts"

const CHROME = process.env.CHROME_PATH ?? "/usr/bin/chromium"
// The binary Debian's launcher script would exec, as the service runs it.
const CHROME_BINARY = executableOf(CHROME)
const SESSIONS = intFromEnv("BENCH_SESSIONS", 20)
const LAUNCHES = intFromEnv("BENCH_LAUNCHES", 10)
// A service runs thousands of lifecycles: the first few dozen still compile and optimise its code
// (its CPU per lifecycle falls by a third over the first 30), so the counted ones start warm.
const WARMUP = intFromEnv("BENCH_WARMUP", 15, 0)
/** A fresh Chromium per direct lifecycle: its warm-up only fills the page cache. */
const DIRECT_WARMUP = Math.min(WARMUP, 2)
const IDLE_SECONDS = intFromEnv("BENCH_IDLE_SECONDS", 12)
const resultFile = new URL("./last-run.json", import.meta.url)

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)
const mean = (values: ReadonlyArray<number>) =>
  values.length === 0 ? 0 : values.reduce((sum, v) => sum + v, 0) / values.length
const median = (values: ReadonlyArray<number>) =>
  [...values].sort((a, b) => a - b)[(values.length - 1) >> 1] ?? 0
const round = (value: number) => Math.round(value * 10) / 10
const benchMs = (since: NodeJS.CpuUsage) => {
  const delta = process.cpuUsage(since)
  return (delta.user + delta.system) / 1000
}
const PNG = [0x89, 0x50, 0x4e, 0x47]
const isPng = (bytes: Uint8Array) => PNG.every((byte, i) => bytes[i] === byte)
const firstPage = async (browser: Browser): Promise<Page> => (await browser.pages())[0] ?? browser.newPage()
const noSignals = { handleSIGINT: false, handleSIGTERM: false, handleSIGHUP: false } as const

const until = async (what: string, done: () => boolean, timeoutMs = 60_000) => {
  const deadline = performance.now() + timeoutMs
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(20)
  }
}

const groups = Cpuacct.open()
const page = await serveLocalPage()
let service: TargetService | undefined
let jails: Jails | undefined
let pg: PgStats.PgStats | undefined
let stopping: Promise<void> | undefined
const stopAll = () =>
  (stopping ??= (async () => {
    await pg?.close().catch(() => {})
    await service?.stop()
    await jails?.close()
    await page.close()
    await groups.close()
  })())
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping`)
    void stopAll().finally(() => process.exit(130))
  })
}

// ---- the service: node src/main/main.ts as npm start runs it, born in the group "service"

interface ServiceSnapshot {
  /** Everything the service ever ran: itself, Postgres, helpers, browsers. */
  readonly tree: number
  /** The node process alone (all its threads: API, relay, egress proxy, timers). */
  readonly node: number
  /** The postmaster, the backends it reaped and those still running. */
  readonly postgres: number
  /** Every browser the service launched (its cgroups, the ones removed included). */
  readonly browsers: number
  /** Each live browser's cgroup (by name and inode), its CPU so far. */
  readonly browserGroups: ReadonlyMap<string, number>
}

type Phase =
  | "create"
  | "to ready and CDP connect"
  | "the bench's probe (its browser's pid, over CDP)"
  | "first page and goto (relay, egress proxy)"
  | "screenshot route"
  | "disconnect and DELETE"
  | "after DELETE (teardown, the next launch, background)"

const serviceSide = async () => {
  groups.enter("service")
  try {
    log(`starting the service (node src/main/main.ts, a fresh data dir, BROWSER_POOL_SIZE=1)`)
    service = await startChildProcess(
      // BENCH_SESSIONS may pass the default 20 creations a minute.
      { BROWSER_POOL_SIZE: "1", LIMIT_SESSION_CREATES_PER_MINUTE: "100000" },
      CHROME
    )
  } finally {
    groups.leave()
  }
  const { baseUrl, dataDir } = service
  const nodePid = service.pid!
  const serviceDir = groups.dir("service")
  const browsersDir = FsSync.readdirSync(serviceDir)
    .filter((name) => name.startsWith("rbs-"))
    .map((name) => Path.join(serviceDir, name))[0]
  if (browsersDir === undefined)
    throw new Error("the service made no cgroup for its browsers (it needs root and a writable cgroup v1)")
  const postmasterPid = Number(
    (await Fs.readFile(Path.join(dataDir!, "postgres", "data", "postmaster.pid"), "utf8")).split("\n")[0]
  )
  pg = await PgStats.connect(dataDir!)

  const browserGroups = () => {
    const found = new Map<string, number>()
    for (const name of FsSync.readdirSync(browsersDir)) {
      const dir = Path.join(browsersDir, name)
      try {
        const stat = FsSync.statSync(dir)
        // Slots are reused: a group is its name and its inode (kernfs hands them out cyclically).
        if (stat.isDirectory() && Cpuacct.pidsIn(dir).length > 0)
          found.set(`${name}#${stat.ino}`, Cpuacct.usageMs(dir))
      } catch {
        // removed meanwhile
      }
    }
    return found
  }
  const snapshot = (): ServiceSnapshot => ({
    tree: Cpuacct.usageMs(serviceDir),
    node: Cpuacct.procCpu(nodePid)!.self,
    postgres: Cpuacct.familyCpu(postmasterPid)!,
    browsers: Cpuacct.usageMs(browsersDir),
    browserGroups: browserGroups()
  })

  /** Until no browser of an earlier session runs, one waits, and none has used 2 ms in the last 300. */
  const quiet = async (spent: ReadonlySet<string>) => {
    let last = snapshot()
    const deadline = performance.now() + 60_000
    while (performance.now() < deadline) {
      await sleep(300)
      const now = snapshot()
      const settled =
        now.browserGroups.size > 0 &&
        [...now.browserGroups.keys()].every((name) => !spent.has(name)) &&
        [...now.browserGroups].every(([name, ms]) => ms - (last.browserGroups.get(name) ?? 0) < 2)
      if (settled) return now
      last = now
    }
    throw new Error(
      `the pool did not refill, or a session's browser did not exit, within 60 s: ${JSON.stringify([...last.browserGroups])} (spent: ${[...spent]})`
    )
  }

  const key = await signUp(baseUrl)
  const spent = new Set<string>()
  /** The service process's CPU by phase of the lifecycle (its threads' schedstat, ns): summed over the counted ones. */
  const phases = new Map<Phase, number>()
  /**
   * One lifecycle: create, CDP connect, goto, the screenshot route, delete; answers its browser's
   * cgroup. From a quiet pool of one warm browser, the session gets that one (`warm`, from the quiet
   * snapshot); otherwise its browser's pid is asked over CDP (the probe, a phase of its own).
   */
  const lifecycle = async (warm: ReadonlyMap<string, number>) => {
    const handed = warm.size === 1 ? [...warm.keys()][0] : undefined
    let at = Cpuacct.threadsCpuMs(nodePid)
    const mark = (phase: Phase) => {
      const now = Cpuacct.threadsCpuMs(nodePid)
      phases.set(phase, (phases.get(phase) ?? 0) + now - at)
      at = now
    }
    const created = await createSession(baseUrl, key)
    mark("create")
    if (created.status !== 201) throw new Error(`create: HTTP ${created.status}`)
    const session: { id: string; cdp_url: string } = json(created.bytes)
    let browserGroup: string | undefined
    const browser = await puppeteer.connect({
      browserWSEndpoint: session.cdp_url,
      headers: { Authorization: `Bearer ${key}` },
      defaultViewport: null
    })
    mark("to ready and CDP connect")
    try {
      if (handed === undefined) {
        const cdp = await browser.target().createCDPSession()
        const info: { processInfo: Array<{ type: string; id: number }> } = await cdp.send(
          "SystemInfo.getProcessInfo" as never
        )
        const browserPid = info.processInfo.find((process) => process.type === "browser")?.id
        browserGroup = browserPid === undefined ? undefined : Cpuacct.groupOf(browserPid)
        await cdp.detach()
        mark("the bench's probe (its browser's pid, over CDP)")
      }
      const tab = await firstPage(browser)
      await tab.goto(page.url)
      mark("first page and goto (relay, egress proxy)")
      const shot = await call(baseUrl, "POST", `/v1/sessions/${session.id}/screenshot`, { key })
      if (shot.status !== 200 || !isPng(shot.bytes)) throw new Error(`screenshot: HTTP ${shot.status}`)
      mark("screenshot route")
    } finally {
      await browser.disconnect()
      const removed = await call(baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key })
      if (removed.status !== 204) throw new Error(`delete: HTTP ${removed.status}`)
      mark("disconnect and DELETE")
    }
    if (handed !== undefined) {
      spent.add(handed)
      return handed
    }
    if (browserGroup === undefined) throw new Error("the session's browser was not found in a cgroup")
    const name = `${Path.basename(browserGroup)}#${FsSync.statSync(browserGroup).ino}`
    spent.add(name)
    return name
  }

  log(`warm-up (not counted): ${WARMUP} lifecycles`)
  for (let i = 0; i < WARMUP; i++) {
    await lifecycle((await quiet(spent)).browserGroups)
  }
  phases.clear()

  // Backends publish their counters at most once a second, an idle one after ten: reads wait them out.
  log(`idle: ${IDLE_SECONDS} s with the pool full and no session`)
  await quiet(spent)
  await sleep(11_000)
  const pgIdleFrom = await pg.read()
  const idleFrom = snapshot()
  const idleStart = performance.now()
  await sleep(IDLE_SECONDS * 1000)
  const idleTo = snapshot()
  const pgIdleTo = await pg.read()
  const idleSeconds = (performance.now() - idleStart) / 1000
  const idle = {
    node: (idleTo.node - idleFrom.node) / idleSeconds,
    postgres: (idleTo.postgres - idleFrom.postgres) / idleSeconds,
    browsers: (idleTo.browsers - idleFrom.browsers) / idleSeconds,
    other:
      (idleTo.tree - idleFrom.tree - (idleTo.node - idleFrom.node)) / idleSeconds -
      (idleTo.postgres - idleFrom.postgres + idleTo.browsers - idleFrom.browsers) / idleSeconds,
    transactions: (pgIdleTo.transactions - pgIdleFrom.transactions) / idleSeconds
  }

  log(`${SESSIONS} lifecycles, each from a quiet pool to the next (its browser gone, a fresh one warm)`)
  const rows: Array<{
    node: number
    postgres: number
    other: number
    launch: number
    session: number
    refill: number
    bench: number
    seconds: number
    /** The service process's threads (schedstat, ns resolution), for the trend. */
    threads: number
  }> = []
  const pgBefore = pgIdleTo
  const measuredFrom = performance.now()
  let from = await quiet(spent)
  for (let i = 0; i < SESSIONS; i++) {
    const benchFrom = process.cpuUsage()
    const started = performance.now()
    const threadsFrom = Cpuacct.threadsCpuMs(nodePid)
    const name = await lifecycle(from.browserGroups)
    const bench = benchMs(benchFrom)
    const to = await quiet(spent)
    // The browser it was handed had used this much by the hand-over: its launch (and its wait, warm).
    const launch = from.browserGroups.get(name)
    if (launch === undefined) throw new Error(`the session's browser ${name} was not warm before the create`)
    // What the browsers alive at the end used in the window: the refill's launch, other warm ones' idling.
    let refill = 0
    for (const [group, ms] of to.browserGroups) refill += ms - (from.browserGroups.get(group) ?? 0)
    const browsers = to.browsers - from.browsers
    const node = to.node - from.node
    const postgres = to.postgres - from.postgres
    rows.push({
      node,
      postgres,
      other: to.tree - from.tree - browsers - node - postgres,
      launch,
      session: browsers - refill,
      refill,
      bench,
      seconds: (performance.now() - started) / 1000,
      threads: Cpuacct.threadsCpuMs(nodePid) - threadsFrom
    })
    from = to
  }
  await sleep(11_000)
  const pgAfter = await pg.read()
  // Less the background's transactions outside the windows (the idle rate).
  const outside = (performance.now() - measuredFrom) / 1000 - rows.reduce((sum, r) => sum + r.seconds, 0)
  const database = {
    ...PgStats.perUnit(pgBefore, pgAfter, SESSIONS),
    transactions: (pgAfter.transactions - pgBefore.transactions - idle.transactions * outside) / SESSIONS
  }
  // The rest of each window: the old browser's teardown, the next one's launch, the background.
  const node = rows.reduce((sum, r) => sum + r.node, 0)
  const during = [...phases.values()].reduce((sum, ms) => sum + ms, 0)
  phases.set("after DELETE (teardown, the next launch, background)", Math.max(0, node - during))
  const nodePhases = Object.fromEntries([...phases].map(([phase, ms]) => [phase, ms / SESSIONS]))
  return { rows, idle, database, nodePid, nodePhases }
}

// ---- the direct side: puppeteer.launch of a Chromium born in the group "direct"

/** Launches through `file`, reads the group at page in hand, runs `work`, closes, waits for the group to empty. */
const launchIn = async (
  dir: string,
  options: Parameters<typeof puppeteer.launch>[0],
  work: (page: Page) => Promise<void>
) => {
  const u0 = Cpuacct.usageMs(dir)
  const benchFrom = process.cpuUsage()
  const browser = await puppeteer.launch({ ...noSignals, ...options })
  let closed = false
  try {
    const tab = await firstPage(browser)
    const u1 = Cpuacct.usageMs(dir)
    await work(tab)
    closed = true
    await browser.close()
    await until("the direct browser's processes to exit", () => Cpuacct.pidsIn(dir).length === 0)
    return { launch: u1 - u0, session: Cpuacct.usageMs(dir) - u1, bench: benchMs(benchFrom) }
  } finally {
    if (!closed) await browser.close().catch(() => {})
  }
}

const directSide = async () => {
  const wrapper = groups.wrapper("direct", CHROME_BINARY)
  const dir = groups.dir("direct")
  const lifecycle = () =>
    launchIn(
      dir,
      {
        executablePath: wrapper,
        headless: true,
        defaultViewport: { width: DEFAULT_WIDTH, height: DEFAULT_HEIGHT },
        args: DIRECT_ARGS
      },
      async (tab) => {
        await tab.goto(page.url)
        if (!isPng(await tab.screenshot())) throw new Error("direct screenshot is not a PNG")
      }
    )
  for (let i = 0; i < DIRECT_WARMUP; i++) await lifecycle()
  log(`direct: ${SESSIONS} lifecycles (puppeteer.launch, goto, page.screenshot, close)`)
  const rows = []
  for (let i = 0; i < SESSIONS; i++) rows.push(await lifecycle())
  return rows
}

// ---- launches with the pool's switches: unsandboxed as root, and in the pool's whole jail

/** Until the group at `dir` has used under 2 ms in 300: a launched browser done with its start-up. */
const settled = async (dir: string) => {
  let last = Cpuacct.usageMs(dir)
  for (let waited = 0; waited < 30_000; waited += 300) {
    await sleep(300)
    const now = Cpuacct.usageMs(dir)
    if (now - last < 2) return now
    last = now
  }
  throw new Error(`the browser in ${dir} did not settle within 30 s`)
}

interface LaunchCost {
  /** CPU from spawn to a page in hand (what puppeteer.launch waits for). */
  readonly pageInHand: number
  /** CPU from spawn until it settles: the whole start-up, as a warm pool browser has done it. */
  readonly settled: number
}

/**
 * Bare launches with the pool's switches (`defaultFlags`), no egress proxy,
 * in a jail's profile dir: `unsandboxed` as root with `--no-sandbox` (born in
 * a group of the bench's own), `jailed` by the jail's whole command as the
 * pool starts it (its cell, own uid, Chromium's sandbox, cgroups, nice, limits).
 */
const launchSide = async () => {
  jails = await openJails()
  const wrapper = groups.wrapper("unsandboxed", CHROME_BINARY)
  const launch = async (variant: "unsandboxed" | "jailed"): Promise<LaunchCost> => {
    const { jail, close } = await jails!.enter()
    try {
      const flags = defaultFlags({
        profileDir: jail.profileDir,
        profilesDir: jails!.info.profilesDir,
        width: DEFAULT_WIDTH,
        height: DEFAULT_HEIGHT
      })
      const before = variant === "jailed" ? 0 : Cpuacct.usageMs(groups.dir("unsandboxed"))
      // In its cell, as the pool starts it: spawned into it, and reached through the cell's DevTools
      // socket (its port is inside the cell alone). Bare: a group of the bench's own, `--no-sandbox`.
      const { browser, pid } =
        variant === "jailed"
          ? await (async () => {
              const command = jail.command(CHROME_BINARY, flags)
              const spawned = await Spawner.start(command.file, command.args, jail.env, 30_000)
              const endpoint = Cell.hostEndpoint(jail.cellDir, await spawned.endpoint)
              const connected = await puppeteer.connect({
                browserWSEndpoint: endpoint,
                defaultViewport: null
              })
              return { browser: connected, pid: spawned.pid }
            })()
          : await (async () => {
              const launched = await puppeteer.launch({
                ...noSignals,
                executablePath: wrapper,
                // Switches before the initial URL, the last argument.
                args: [...flags.slice(0, -1), "--no-sandbox", ...flags.slice(-1)],
                ignoreDefaultArgs: true,
                env: process.env,
                defaultViewport: null
              })
              return { browser: launched, pid: launched.process()!.pid! }
            })()
      try {
        await firstPage(browser)
        const group = Cpuacct.groupOf(pid)!
        if (variant === "jailed" && !Path.basename(group).startsWith("b-"))
          throw new Error("the jailed browser is in no cgroup of its jail")
        const pageInHand = Cpuacct.usageMs(group) - before
        return { pageInHand, settled: (await settled(group)) - before }
      } finally {
        await browser.close()
        if (variant === "unsandboxed")
          await until(
            "the browser's processes to exit",
            () => Cpuacct.pidsIn(groups.dir("unsandboxed")).length === 0
          )
      }
    } finally {
      await close()
    }
  }
  await launch("unsandboxed")
  await launch("jailed")
  log(
    `launches with the pool's switches, ${LAUNCHES} of each by turns: unsandboxed (root, --no-sandbox), the pool's jail`
  )
  const rows: { unsandboxed: Array<LaunchCost>; jailed: Array<LaunchCost> } = { unsandboxed: [], jailed: [] }
  for (let i = 0; i < LAUNCHES; i++) {
    rows.unsandboxed.push(await launch("unsandboxed"))
    rows.jailed.push(await launch("jailed"))
  }
  return rows
}

try {
  const serviceRun = await serviceSide()
  await pg!.close()
  pg = undefined
  await service!.stop()
  const direct = await directSide()
  const launches = await launchSide()

  const s = serviceRun.rows
  const perLifecycle = {
    service: {
      node: mean(s.map((r) => r.node)),
      postgres: mean(s.map((r) => r.postgres)),
      other: mean(s.map((r) => r.other)),
      browserLaunch: mean(s.map((r) => r.launch)),
      browserSession: mean(s.map((r) => r.session))
    },
    direct: {
      browserLaunch: mean(direct.map((r) => r.launch)),
      browserSession: mean(direct.map((r) => r.session))
    },
    bench: { service: mean(s.map((r) => r.bench)), direct: mean(direct.map((r) => r.bench)) },
    windowSeconds: mean(s.map((r) => r.seconds))
  }
  const sv = perLifecycle.service
  const serviceTotal = sv.node + sv.postgres + sv.other + sv.browserLaunch + sv.browserSession
  const directTotal = perLifecycle.direct.browserLaunch + perLifecycle.direct.browserSession
  const notChromiumRaw = sv.node + sv.postgres + sv.other
  const idleRates = serviceRun.idle
  // What the node spends anyway (its loops, the cluster's storage reads, Postgres's own), at the
  // rate measured idle with the pool full, over each window: not a session's cost. The raw figure
  // stays beside it.
  const background =
    (idleRates.node + idleRates.postgres + Math.max(0, idleRates.other)) * perLifecycle.windowSeconds
  const notChromium = notChromiumRaw - background
  const launchCost = (rows: ReadonlyArray<LaunchCost>) => ({
    pageInHand: mean(rows.map((r) => r.pageInHand)),
    settled: mean(rows.map((r) => r.settled)),
    settledMedian: median(rows.map((r) => r.settled))
  })
  const unsandboxed = launchCost(launches.unsandboxed)
  const jailed = launchCost(launches.jailed)
  // One launch's CPU is all of its start-up (to settled): a warm pool browser has done all of it, and
  // a launch that navigates at once does the rest of it meanwhile.
  const budgets = {
    notChromium: {
      /** The lifecycle's own: the raw figure less the background at the idle rate over its window. */
      ms: notChromium,
      raw: notChromiumRaw,
      background,
      rawOfLaunch: notChromiumRaw / unsandboxed.settled,
      ofLaunch: notChromium / unsandboxed.settled,
      // The launch a user pays for without us: puppeteer.launch with Chromium's defaults, to page in hand.
      ofDirectLaunch: notChromium / perLifecycle.direct.browserLaunch,
      target: 0.1
    },
    sandbox: {
      unsandboxed: unsandboxed.settled,
      jailed: jailed.settled,
      ratio: jailed.settled / unsandboxed.settled,
      target: 1.15
    }
  }

  const cells: Array<[string, number | undefined, number | undefined]> = [
    ["service process (API, CDP relay, egress proxy)", sv.node, undefined],
    ["Postgres (postmaster and backends)", sv.postgres, undefined],
    ["other children of the service (jail set-up, ...)", sv.other, undefined],
    [
      "Chromium launch (to the hand-over; direct: to page in hand)",
      sv.browserLaunch,
      perLifecycle.direct.browserLaunch
    ],
    ["Chromium session (from there to its exit)", sv.browserSession, perLifecycle.direct.browserSession],
    ["total", serviceTotal, directTotal]
  ]
  const fmt = (v: number | undefined) => (v === undefined ? "-" : v.toFixed(1))
  const header = [`CPU per lifecycle, ms (mean of ${SESSIONS})`, "service", "direct"]
  const widths = header.map((h, i) =>
    Math.max(h.length, ...cells.map((c) => (i === 0 ? c[0] : fmt(c[i] as number)).length))
  )
  const line = (row: ReadonlyArray<string>) =>
    row.map((cell, i) => (i === 0 ? cell.padEnd(widths[0]!) : cell.padStart(widths[i]!))).join("  ")
  const db = serviceRun.database
  const idle = serviceRun.idle
  const verdict = (ok: boolean) => (ok ? "PASS" : "FAIL")
  console.log(
    [
      "",
      `session cost: ${SESSIONS} lifecycles each side (create, CDP connect, goto a local page, screenshot, delete), ${Os.availableParallelism()} CPUs, node ${process.version}; cgroup v1 cpuacct`,
      "",
      line(header),
      line(widths.map((w) => "-".repeat(w))),
      ...cells.map(([name, a, b]) => line([name, fmt(a), fmt(b)])),
      `ratio service / direct: ${(serviceTotal / directTotal).toFixed(2)}x`,
      // A few lifecycles cost two or three times the others (255 and 279 ms in two runs): the median is the usual one.
      `the service process per lifecycle (its threads), ms: mean ${round(mean(s.map((r) => r.threads)))}, median ${round(median(s.map((r) => r.threads)))}, max ${round(Math.max(...s.map((r) => r.threads)))}`,
      `the service process by phase, ms: ${Object.entries(serviceRun.nodePhases)
        .map(([phase, ms]) => `${phase} ${ms.toFixed(1)}`)
        .join("; ")}`,
      `the bench's own process (puppeteer, HTTP; in neither column): service side ${round(perLifecycle.bench.service)}, direct side ${round(perLifecycle.bench.direct)}`,
      `each service window (a quiet pool to the next) lasted ${perLifecycle.windowSeconds.toFixed(2)} s; idle, the pool full: service ${idle.node.toFixed(1)} ms/s, Postgres ${idle.postgres.toFixed(1)} ms/s, warm browser ${idle.browsers.toFixed(1)} ms/s`,
      `Postgres per lifecycle: ${db.transactions.toFixed(1)} transactions (the background's ${idle.transactions.toFixed(1)}/s in it), rows inserted ${db.rowsInserted.toFixed(1)} / updated ${db.rowsUpdated.toFixed(1)} / deleted ${db.rowsDeleted.toFixed(1)}, ${(db.walBytes / 1024).toFixed(1)} KiB of WAL; rows written by table: ${Object.entries(
        db.writesByTable
      )
        .map(([table, n]) => `${table} ${n.toFixed(1)}`)
        .join(", ")}`,
      `bare launches with the pool's switches, mean of ${LAUNCHES}, ms to page in hand / to settled (median): unsandboxed as root ${unsandboxed.pageInHand.toFixed(1)} / ${unsandboxed.settled.toFixed(1)} (${unsandboxed.settledMedian.toFixed(1)}); in the pool's jail (own uid, Chromium's sandbox, cgroups, nice, prlimit) ${jailed.pageInHand.toFixed(1)} / ${jailed.settled.toFixed(1)} (${jailed.settledMedian.toFixed(1)})`,
      `not Chromium (service + Postgres + other) per lifecycle: ${notChromiumRaw.toFixed(1)} ms = ${(budgets.notChromium.rawOfLaunch * 100).toFixed(1)}% of one launch settled, of which ${background.toFixed(1)} ms is the node's background at its idle rate over the window`,
      `verdict: not Chromium, the lifecycle's own (less the background) ${notChromium.toFixed(1)} ms = ${(budgets.notChromium.ofLaunch * 100).toFixed(1)}% of one launch settled (target < 10%) ${verdict(budgets.notChromium.ofLaunch < 0.1)} (${(budgets.notChromium.ofDirectLaunch * 100).toFixed(1)}% of the direct side's launch); jailed launch ${budgets.sandbox.ratio.toFixed(2)}x an unsandboxed one (target <= 1.15x) ${verdict(budgets.sandbox.ratio <= 1.15)}`,
      ""
    ].join("\n")
  )
  const result = {
    finishedAt: new Date().toISOString(),
    machine: { cpus: Os.availableParallelism(), node: process.version },
    counts: { sessions: SESSIONS, launches: LAUNCHES, warmup: WARMUP },
    perLifecycleMs: perLifecycle,
    serviceProcessByPhaseMs: serviceRun.nodePhases,
    totals: { service: serviceTotal, direct: directTotal, ratio: serviceTotal / directTotal },
    idleMsPerSecond: idle,
    postgresPerLifecycle: db,
    launches: { unsandboxed, jailed, samples: launches },
    budgets,
    // Each counted lifecycle's service process CPU, in order: a trend down is code still warming up.
    serviceProcessByLifecycleMs: s.map((r) => Math.round(r.threads * 10) / 10),
    serviceProcessMedianMs: round(median(s.map((r) => r.threads)))
  }
  // The repository's own settings, so the file passes the format check as written.
  const options = (await Prettier.resolveConfig(resultFile.pathname)) ?? {}
  const text = await Prettier.format(JSON.stringify(result), { ...options, filepath: resultFile.pathname })
  await Fs.writeFile(resultFile, text)
  log(`results written to ${resultFile.pathname}`)
} finally {
  await stopAll()
}
