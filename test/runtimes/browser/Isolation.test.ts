import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import puppeteer from "puppeteer-core"
import { BrowserPool } from "../../../src/runtimes/browser/BrowserPool.ts"
import * as Cell from "../../../src/runtimes/browser/Cell.ts"
import {
  BROWSER_NICENESS,
  BrowserIsolation,
  systemView,
  uidRange,
  UID_SLOTS
} from "../../../src/runtimes/browser/Isolation.ts"
import {
  MEMORY_DIR,
  MEMORY_PROFILE_CACHE_BYTES,
  profilesInMemory
} from "../../../src/runtimes/browser/ProfilesPlace.ts"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { BrowserConfig } from "../../../src/runtimes/browser/BrowserConfig.ts"
import { AdHosts } from "../../../src/platform/net/AdHosts.ts"
import { Egress } from "../../../src/platform/net/Egress.ts"
import { LocalPorts } from "../../../src/platform/net/LocalPorts.ts"
import * as TestService from "../../support/TestService.ts"

const MEMORY_MB = 1536
const OPEN_FILES = 4096

const read = (path: string) => Effect.promise(() => Fs.readFile(path, "utf8").catch(() => ""))

const statusField = (pid: number, field: string) =>
  Effect.map(
    read(`/proc/${pid}/status`),
    (text) => new RegExp(`^${field}:[ \\t]*(.*)$`, "m").exec(text)?.[1] ?? ""
  )

/** The processes of a browser: its process group (Chromium and every helper it forks). */
const processGroup = (leader: number) =>
  Effect.promise(async () => {
    const pids: Array<number> = []
    for (const entry of await Fs.readdir("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      const stat = await Fs.readFile(`/proc/${entry}/stat`, "utf8").catch(() => "")
      // Fields after the command (which may hold spaces): state, ppid, pgrp.
      const after = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (Number(after[2]) === leader) pids.push(Number(entry))
    }
    return pids
  })

/** Chromium's own process (not a helper of its, nor its cell's) in a browser's process group. */
const chromiumOf = (leader: number) =>
  Effect.gen(function* () {
    for (const pid of yield* processGroup(leader)) {
      const args = (yield* read(`/proc/${pid}/cmdline`)).split("\0")
      if (args[0]!.endsWith("/chromium") && !args.some((arg) => arg.startsWith("--type="))) return pid
    }
    return assert.fail(`no Chromium in the group of ${leader}`)
  })

/** The processes of the cell (`rbs-cell`: the one that waits, and the cell's init) in a group. */
const isCellProcess = (pid: number) =>
  Effect.map(read(`/proc/${pid}/cmdline`), (cmdline) => cmdline.split("\0")[0] === Cell.CELL_EXEC)

const renderersOf = (leader: number) =>
  Effect.gen(function* () {
    for (let attempt = 0; attempt < 100; attempt++) {
      const renderers: Array<number> = []
      for (const pid of yield* processGroup(leader)) {
        if ((yield* read(`/proc/${pid}/cmdline`)).includes("--type=renderer")) renderers.push(pid)
      }
      if (renderers.length > 0) return renderers
      yield* Effect.sleep("50 millis")
    }
    return []
  })

const userNamespace = (pid: number) => Effect.promise(() => Fs.readlink(`/proc/${pid}/ns/user`))

/** What a page shows at `url`, or the navigation's error. */
const visit = (wsEndpoint: string, url: string) =>
  Effect.promise(async () => {
    const browser = await puppeteer.connect({ browserWSEndpoint: wsEndpoint, defaultViewport: null })
    try {
      const page = await browser.newPage()
      try {
        await page.goto(url, { timeout: 10_000 })
        return {
          text: await page.evaluate(() => ((globalThis as any).document.body?.innerText ?? "") as string)
        }
      } catch (error) {
        return { error: String(error) }
      } finally {
        await page.close()
      }
    } finally {
      await browser.disconnect()
    }
  })

describe("browser isolation", () => {
  it("uses the uid range the user namespace maps, or the top of the widest one", () => {
    assert.strictEqual(uidRange("0 0 4294967295", 2_000_000_000), 2_000_000_000)
    // A container mapping 65536 uids: the preferred base is not there.
    assert.strictEqual(uidRange("0 100000 65536", 2_000_000_000), 65536 - UID_SLOTS)
    assert.isUndefined(uidRange("0 100000 1000", 2_000_000_000))
  })

  it("puts fresh profiles on a tmpfs with room, unless told not to; told to, refuses a dir that is not one", () => {
    const disk = Os.tmpdir()
    assert.isFalse(profilesInMemory(false))
    assert.isFalse(profilesInMemory(undefined, "/nonexistent"))
    assert.match(
      String(profilesInMemory(true, "/nonexistent")),
      /BROWSER_PROFILES_IN_MEMORY=true needs a tmpfs/
    )
    if (FsSync.statfsSync(disk).type !== 0x01021994) {
      assert.isFalse(profilesInMemory(undefined, disk), "not a tmpfs")
      assert.isString(profilesInMemory(true, disk))
    }
    const shm = FsSync.existsSync(MEMORY_DIR) ? FsSync.statfsSync(MEMORY_DIR) : undefined
    if (shm !== undefined && shm.type === 0x01021994) {
      assert.isTrue(profilesInMemory(true))
      assert.strictEqual(
        profilesInMemory(undefined),
        shm.bavail * shm.bsize >= 1024 ** 3,
        "auto wants 1 GiB free"
      )
    }
  })

  it.effect.skipIf(!FsSync.existsSync(Cell.CELL_EXEC))(
    "rbs-cell joins the cgroups, sets the limits, the niceness and the user, then execs in the cell; or says why not",
    () =>
      Effect.gen(function* () {
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => {
            const made = FsSync.mkdtempSync(Path.join(Os.tmpdir(), "rbs-cell-test-"))
            FsSync.mkdirSync(Cell.rootOf(made))
            return made
          }),
          (made) => Effect.sync(() => FsSync.rmSync(made, { recursive: true, force: true }))
        )
        const root = process.getuid?.() === 0
        const spec = (changes: Partial<Cell.CellSpec> = {}): Cell.CellSpec => ({
          dir,
          uid: root ? 2147000000 : null,
          openFiles: 1234,
          dataBytes: 0,
          tmpBytes: 0,
          niceness: 7,
          cgroupProcs: [],
          view: systemView("/bin/cat", []),
          downloadsDir: Path.join(dir, "downloads"),
          ...changes
        })
        const run = (changes: Partial<Cell.CellSpec>, args: ReadonlyArray<string>) =>
          Effect.sync(() => {
            const command = Cell.command(spec(changes), args[0]!, args.slice(1))
            return ChildProcess.spawnSync(command.file, command.args, { encoding: "utf8" })
          })
        const status = yield* run({}, ["/bin/cat", "/proc/self/status"])
        assert.strictEqual(status.status, 0, status.stderr)
        const field = (name: string) =>
          new RegExp(`^${name}:[ \\t]*(.*)$`, "m").exec(status.stdout)?.[1] ?? ""
        assert.strictEqual(field("NoNewPrivs"), "1")
        // The first program of its own PID namespace after the cell's init: pid 2 there.
        assert.strictEqual(field("NSpid").split(/\s+/).at(-1), "2")
        if (root) {
          assert.strictEqual(field("Uid").split(/\s+/)[0], "2147000000")
          assert.strictEqual(field("Gid").split(/\s+/)[0], "2147000000")
          assert.strictEqual(field("Groups").trim(), "")
        }
        const limits = yield* run({ dataBytes: 1073741824 }, ["/bin/cat", "/proc/self/limits"])
        assert.match(limits.stdout, /Max open files\s+1234\s+1234/)
        assert.match(limits.stdout, /Max data size\s+1073741824\s+1073741824/)
        const stat = yield* run({}, ["/bin/cat", "/proc/self/stat"])
        assert.strictEqual(Number(stat.stdout.slice(stat.stdout.lastIndexOf(")") + 2).split(" ")[16]), 7)
        // Refusals exit 111 with a line saying what failed, and run nothing.
        const missing = yield* run({ cgroupProcs: ["/nonexistent/cgroup.procs"] }, ["/bin/true"])
        assert.strictEqual(missing.status, 111)
        assert.match(missing.stderr, /rbs-cell: open \/nonexistent\/cgroup.procs: No such file/)
        const malformed = ChildProcess.spawnSync(Cell.CELL_EXEC, ["--uid", "x", "--", "/bin/true"], {
          encoding: "utf8"
        })
        assert.strictEqual(malformed.status, 111)
        assert.match(malformed.stderr, /rbs-cell: uid x/)
        if (root) {
          const unchanged = yield* run({ uid: null }, ["/bin/true"])
          assert.strictEqual(unchanged.status, 111, "as root, a browser never keeps root")
          assert.match(unchanged.stderr, /--uid is required/)
        }
      }).pipe(Effect.scoped)
  )

  it.live(
    "each browser runs as its own unprivileged user, sandboxed, limited, with a profile nobody else can read",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        process.env.RBS_ISOLATION_TEST_SECRET = "must-not-reach-the-browser"
        const pool = BrowserPool.layer.pipe(
          Layer.provideMerge(Egress.layer),
          Layer.provideMerge(AdHosts.layer),
          Layer.provideMerge(LocalPorts.layer),
          Layer.provideMerge(BrowserConfig.layer),
          Layer.provideMerge(
            ServiceConfig.layer({
              dataDir,
              browserPoolSize: 2,
              browserMemoryMb: MEMORY_MB,
              browserOpenFiles: OPEN_FILES,
              browserEnv: { TZ: "Europe/Berlin" },
              logLevel: "Error"
            })
          )
        )
        yield* Effect.gen(function* () {
          const browsers = yield* BrowserPool
          const egress = yield* Egress
          const isolation = yield* BrowserIsolation
          const scopeA = yield* Scope.make()
          const scopeB = yield* Scope.make()
          const a = (yield* browsers.acquire({ region: egress.defaultRegion }).pipe(Scope.provide(scopeA)))
            .browser
          const b = (yield* browsers.acquire({ region: egress.defaultRegion }).pipe(Scope.provide(scopeB)))
            .browser

          // Users: never root, and never the same for two browsers.
          const chromeA = yield* chromiumOf(a.pid)
          const chromeB = yield* chromiumOf(b.pid)
          const uidA = Number((yield* statusField(chromeA, "Uid")).split(/\s+/)[0])
          const uidB = Number((yield* statusField(chromeB, "Uid")).split(/\s+/)[0])
          assert.notStrictEqual(uidA, 0)
          assert.notStrictEqual(uidB, 0)
          if (process.getuid?.() === 0) {
            assert.strictEqual(isolation.info.user, "per-browser")
            assert.notStrictEqual(uidA, uidB)
            assert.strictEqual((yield* statusField(chromeA, "Groups")).trim(), "")
            assert.strictEqual(Number((yield* statusField(chromeA, "Gid")).split(/\s+/)[0]), uidA)
          }
          assert.strictEqual(yield* statusField(chromeA, "NoNewPrivs"), "1")
          // Every process of the group is Chromium's, as the browser's user, or the cell's two.
          let cellProcesses = 0
          for (const pid of yield* processGroup(a.pid)) {
            if (yield* isCellProcess(pid)) {
              cellProcesses++
              continue
            }
            assert.notStrictEqual(
              (yield* statusField(pid, "Uid")).split(/\s+/)[0],
              "0",
              `pid ${pid} runs as root`
            )
          }
          assert.strictEqual(cellProcesses, 2, "the cell's waiter and its init")

          // The sandbox: no --no-sandbox; renderers under seccomp-bpf in a user namespace of their own.
          assert.notInclude(yield* read(`/proc/${a.pid}/cmdline`), "--no-sandbox")
          const renderers = yield* renderersOf(a.pid)
          assert.isNotEmpty(renderers)
          const browserNamespace = yield* userNamespace(chromeA)
          for (const pid of renderers) {
            assert.strictEqual(
              yield* statusField(pid, "Seccomp"),
              "2",
              `renderer ${pid} is not under seccomp`
            )
            assert.strictEqual(yield* statusField(pid, "NoNewPrivs"), "1")
            assert.notStrictEqual(yield* userNamespace(pid), browserNamespace)
          }

          // Profiles: the browser's own, mode 0700; their parent the service's alone (each cell binds its own).
          // On a tmpfs when there is one with room, the HTTP cache capped (it is the browser's memory).
          assert.strictEqual(isolation.info.profilesInMemory, profilesInMemory(undefined))
          const cmdline = yield* read(`/proc/${a.pid}/cmdline`)
          if (isolation.info.profilesInMemory) {
            assert.strictEqual(Path.dirname(isolation.info.profilesDir), MEMORY_DIR)
            assert.include(cmdline, `--disk-cache-size=${MEMORY_PROFILE_CACHE_BYTES}`)
          } else assert.notInclude(cmdline, "--disk-cache-size")
          assert.strictEqual(Path.dirname(a.profileDir), isolation.info.profilesDir)
          const profileA = FsSync.statSync(a.profileDir)
          assert.strictEqual(profileA.mode & 0o777, 0o700)
          assert.strictEqual(profileA.uid, uidA)
          assert.strictEqual(FsSync.statSync(isolation.info.profilesDir).mode & 0o777, 0o700)

          // Limits: open files always; memory and tasks in the browser's cgroup, or RLIMIT_DATA without one.
          const limits = yield* read(`/proc/${chromeA}/limits`)
          assert.match(limits, new RegExp(`Max open files\\s+${OPEN_FILES}\\s+${OPEN_FILES}`))
          const memoryBytes = MEMORY_MB * 1024 * 1024
          if (isolation.info.limits === "rlimit") {
            assert.match(limits, new RegExp(`Max data size\\s+${memoryBytes}\\s+${memoryBytes}`))
          } else {
            const cgroupLines = (yield* read(`/proc/${chromeA}/cgroup`)).trim().split("\n")
            const memoryLine =
              isolation.info.limits === "cgroup-v2"
                ? cgroupLines.find((line) => line.startsWith("0::"))!
                : cgroupLines.find((line) => line.split(":")[1]!.split(",").includes("memory"))!
            const [, controllers, path] = memoryLine.split(":") as [string, string, string]
            assert.match(path, /\/rbs-[0-9a-f]{12}\/b-\d+$/)
            const dir = Path.join("/sys/fs/cgroup", controllers, path)
            const limitFile = isolation.info.limits === "cgroup-v2" ? "memory.max" : "memory.limit_in_bytes"
            assert.strictEqual((yield* read(Path.join(dir, limitFile))).trim(), String(memoryBytes))
            // Every process of the browser is in it, helpers included.
            const members = (yield* read(Path.join(dir, "cgroup.procs"))).trim().split("\n").map(Number)
            for (const pid of yield* processGroup(a.pid)) assert.include(members, pid)
            // On v1 its CPU is counted in a cpuacct group of its own too (v2 counts it in every group).
            const cpuacctLine = cgroupLines.find((line) => line.split(":")[1]!.split(",").includes("cpuacct"))
            if (isolation.info.limits === "cgroup-v1" && cpuacctLine !== undefined) {
              const [, cpuControllers, cpuPath] = cpuacctLine.split(":") as [string, string, string]
              assert.match(cpuPath, /\/rbs-[0-9a-f]{12}\/b-\d+$/)
              const usage = yield* read(Path.join("/sys/fs/cgroup", cpuControllers, cpuPath, "cpuacct.usage"))
              assert.isAbove(Number(usage), 0, "the browser's launch is counted in its group")
            }
          }

          // Below the service's CPU priority: a page spinning the CPU does not starve the API or the database.
          const stat = yield* read(`/proc/${chromeA}/stat`)
          const nice = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16])
          assert.strictEqual(nice, BROWSER_NICENESS)

          // The environment: none of the service's (secrets live there), a home in the profile.
          const environ = (yield* read(`/proc/${chromeA}/environ`)).split("\0")
          assert.notInclude(environ.join("\n"), "must-not-reach-the-browser")
          assert.include(environ, `HOME=${a.profileDir}`)
          // Its /tmp is its cell's own tmpfs, not the host's: it goes with the cell, however it ends.
          assert.include(environ, "TMPDIR=/tmp")
          assert.notStrictEqual(
            FsSync.statSync(`/proc/${chromeA}/root/tmp`).dev,
            FsSync.statSync("/tmp").dev,
            "a /tmp of its own"
          )
          assert.include(environ, "TZ=Europe/Berlin", "the configured clock and locale pass")

          // One browser cannot read the other's profile, even driven over raw CDP past the relay's guard.
          const secret = Path.join(b.profileDir, "secret.txt")
          yield* Effect.promise(async () => {
            await Fs.writeFile(secret, "b's cookies", { mode: 0o600 })
            await Fs.chown(secret, uidB, uidB)
          })
          const own = Path.join(a.profileDir, "mine.txt")
          yield* Effect.promise(async () => {
            await Fs.writeFile(own, "a's own", { mode: 0o600 })
            await Fs.chown(own, uidA, uidA)
          })
          const mine = yield* visit(a.wsEndpoint, `file://${own}`)
          assert.include(mine.text ?? mine.error, "a's own", "a browser reads its own profile")
          const theirs = yield* visit(a.wsEndpoint, `file://${secret}`)
          assert.notInclude(theirs.text ?? theirs.error ?? "", "b's cookies")
          const listing = yield* visit(a.wsEndpoint, `file://${b.profileDir}/`)
          assert.notInclude(listing.text ?? listing.error ?? "", "secret.txt")

          // Nor reach any DevTools: b's is in b's cell alone, and a page's traffic goes through its egress proxy.
          const devtools = yield* visit(a.wsEndpoint, `http://127.0.0.1:${Cell.DEVTOOLS_PORT}/json/version`)
          assert.notInclude(devtools.text ?? "", "webSocketDebuggerUrl")

          // Teardown leaves nothing of the jail: processes, cgroup, profile, Chromium's temp dirs.
          // Another file's browser (a puppeteer or playwright launch as this user, running beside
          // this one) may make one meanwhile: with a user per browser, only theirs count.
          const chromiumTemps = () =>
            FsSync.readdirSync(Os.tmpdir()).filter((name) => {
              if (!name.startsWith("org.chromium.")) return false
              if (isolation.info.user !== "per-browser") return true
              try {
                return FsSync.statSync(Path.join(Os.tmpdir(), name)).uid !== process.getuid?.()
              } catch {
                return false
              }
            })
          const tempsBefore = chromiumTemps()
          const groupA = yield* processGroup(a.pid)
          yield* Scope.close(scopeA, Exit.void)
          for (const pid of groupA) {
            // What it was doing, should it still be there (its state and kernel wait).
            if (TestService.isAlive(pid)) {
              const read = (file: string) => {
                try {
                  return FsSync.readFileSync(`/proc/${pid}/${file}`, "utf8").trim()
                } catch {
                  return "(gone)"
                }
              }
              const stat = read("stat")
              if (stat !== "(gone)")
                assert.fail(`pid ${pid} outlived its browser: ${stat}, waiting in ${read("wchan")}`)
            }
          }
          assert.isFalse(FsSync.existsSync(a.profileDir))
          assert.isFalse(FsSync.existsSync(a.cell.dir), "its cell's dir went with it")
          yield* Scope.close(scopeB, Exit.void)
          const tempsAfter = chromiumTemps()
          assert.deepStrictEqual(
            tempsAfter.filter((name) => !tempsBefore.includes(name)),
            [],
            "no org.chromium.* dir left in /tmp"
          )
        }).pipe(Effect.provide(pool))
      }).pipe(
        Effect.scoped,
        Effect.ensuring(Effect.sync(() => delete process.env.RBS_ISOLATION_TEST_SECRET))
      ),
    90_000
  )
})
