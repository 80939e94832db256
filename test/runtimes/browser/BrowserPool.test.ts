import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Scope } from "effect"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { BrowserPool } from "../../../src/runtimes/browser/BrowserPool.ts"
import * as Cell from "../../../src/runtimes/browser/Cell.ts"
import { findProcessesUsing } from "../../../src/runtimes/browser/Chromium.ts"
import { BrowserIsolation } from "../../../src/runtimes/browser/Isolation.ts"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { BrowserConfig } from "../../../src/runtimes/browser/BrowserConfig.ts"
import { AdHosts } from "../../../src/platform/net/AdHosts.ts"
import { Egress } from "../../../src/platform/net/Egress.ts"
import { LocalPorts } from "../../../src/platform/net/LocalPorts.ts"
import * as TestService from "../../support/TestService.ts"

const cmdline = (pid: number) =>
  Effect.promise(() => Fs.readFile(`/proc/${pid}/cmdline`, "utf8").then((text) => text.split("\0")))

describe("BrowserPool", () => {
  it.live(
    "a warm browser proxies through its own egress listener; a given profile takes the cold path and is kept",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        const pool = BrowserPool.layer.pipe(
          Layer.provideMerge(Egress.layer),
          Layer.provideMerge(AdHosts.layer),
          Layer.provideMerge(LocalPorts.layer),
          Layer.provide(BrowserConfig.layer),
          Layer.provide(ServiceConfig.layer({ dataDir, browserPoolSize: 1, logLevel: "Error" }))
        )
        yield* Effect.gen(function* () {
          const browsers = yield* BrowserPool
          const egress = yield* Egress

          const warm = yield* Scope.make()
          const taken = yield* browsers.acquire({ region: egress.defaultRegion }).pipe(Scope.provide(warm))
          const args = yield* cmdline(taken.browser.pid)
          // Its cell's one way out, which leads to its own proxy's socket; its DevTools reached the same way.
          assert.include(args, `--proxy-server=http://127.0.0.1:${Cell.PROXY_PORT}`)
          assert.include(args, "--proxy-bypass-list=<-loopback>")
          assert.isTrue(
            FsSync.statSync(Cell.egressSocket(taken.browser.cell.dir, Cell.PROXY_PORT)).isSocket()
          )
          assert.strictEqual(
            taken.browser.wsEndpoint.split(":/devtools/")[0],
            `ws+unix:${Cell.devtoolsSocket(taken.browser.cell.dir)}`
          )
          assert.strictEqual(taken.egress.region.name, "local")
          assert.deepStrictEqual(taken.egress.counters(), { bytesUp: 0, bytesDown: 0 })
          yield* Scope.close(warm, Exit.void)
          assert.isFalse(TestService.isAlive(taken.browser.pid))
          assert.isFalse(FsSync.existsSync(taken.browser.cell.dir), "its cell's dir went with it")

          const profileDir = Path.join(dataDir, "workspaces", "kept-profile")
          const cold = yield* Scope.make()
          const own = yield* browsers
            .acquire({ region: egress.defaultRegion, profileDir })
            .pipe(Scope.provide(cold))
          assert.include(yield* cmdline(own.browser.pid), `--user-data-dir=${profileDir}`)
          assert.strictEqual(own.browser.profileDir, profileDir)
          yield* Scope.close(cold, Exit.void)
          assert.isFalse(TestService.isAlive(own.browser.pid))
          const kept = yield* Effect.promise(() => Fs.readdir(profileDir))
          assert.include(kept, "Default", "the profile outlives its browser")
        }).pipe(Effect.provide(pool))
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "never runs more browsers than MAX_BROWSERS: a further acquire waits for a session to end",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        const pool = BrowserPool.layer.pipe(
          Layer.provideMerge(Egress.layer),
          Layer.provideMerge(AdHosts.layer),
          Layer.provideMerge(LocalPorts.layer),
          Layer.provide(BrowserConfig.layer),
          Layer.provide(
            ServiceConfig.layer({ dataDir, browserPoolSize: 3, maxBrowsers: 2, logLevel: "Error" })
          )
        )
        yield* Effect.gen(function* () {
          const browsers = yield* BrowserPool
          const egress = yield* Egress
          const isolation = yield* BrowserIsolation
          const running = Effect.promise(() => findProcessesUsing(isolation.info.profilesDir))
          assert.strictEqual(browsers.capacity, 2)
          yield* browsers.ready
          // BROWSER_POOL_SIZE asks for 3 warm; the capacity allows 2: once two are up, no third follows.
          for (let i = 0; i < 200 && (yield* browsers.idle) < 2; i++) yield* Effect.sleep("50 millis")
          assert.strictEqual(yield* browsers.idle, 2)
          yield* Effect.sleep("500 millis")
          assert.strictEqual(yield* browsers.idle, 2)
          assert.strictEqual(yield* browsers.target, 2)

          const first = yield* Scope.make()
          const second = yield* Scope.make()
          const a = yield* browsers.acquire({ region: egress.defaultRegion }).pipe(Scope.provide(first))
          yield* browsers.acquire({ region: egress.defaultRegion }).pipe(Scope.provide(second))
          // Both in use: nothing warm may be launched, the target says so.
          yield* Effect.sleep("500 millis")
          assert.strictEqual(yield* browsers.target, 0)
          assert.strictEqual(yield* browsers.idle, 0)

          // A third waits for a place, and gets one once a session ends.
          const third = yield* Scope.make()
          const waiting = yield* browsers
            .acquire({ region: egress.defaultRegion })
            .pipe(Scope.provide(third), Effect.forkChild)
          yield* Effect.sleep("1 second")
          assert.isUndefined(waiting.pollUnsafe(), "a third browser was placed beyond MAX_BROWSERS")
          yield* browsers.retire(first)
          const c = yield* Fiber.join(waiting)
          assert.notStrictEqual(c.browser.pid, a.browser.pid)
          assert.isFalse(TestService.isAlive(a.browser.pid))
          // Counted by process groups: one per browser, helpers included.
          const groups = new Set(
            (yield* running).map((pid) => {
              const stat = FsSync.readFileSync(`/proc/${pid}/stat`, "utf8")
              return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]
            })
          )
          assert.isAtMost(groups.size, 2)
          yield* Scope.close(second, Exit.void)
          yield* Scope.close(third, Exit.void)
        }).pipe(Effect.provide(pool))
      }).pipe(Effect.scoped),
    90_000
  )
})
