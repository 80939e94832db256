import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import puppeteer from "puppeteer-core"
import WebSocket from "ws"
import * as Path from "node:path"
import { findProcessesUsing } from "../../src/runtimes/browser/Chromium.ts"
import { isReady, request, signUp, waitForSession } from "../support/Client.ts"
import { startService, stop } from "../support/ServiceProcess.ts"
import * as TrafficServer from "../support/TrafficServer.ts"
import * as TestService from "../support/TestService.ts"

describe("restarts", () => {
  it.live(
    "after a crash, the next start closes the old sessions with server_restart; their browsers are gone",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        const profilesDir = TestService.profilesDirOf(dataDir)
        const env = {
          DATA_DIR: dataDir,
          DATABASE_URL: yield* TestService.freshDatabase,
          PORT: String(yield* TestService.freePort),
          BROWSER_POOL_SIZE: "1",
          SIGNUP_CREDIT_USD: "5",
          EGRESS_ALLOW_CIDRS: "127.0.0.1/32"
        }
        const traffic = yield* TrafficServer.serve("127.0.0.1")

        const first = yield* startService(env)
        const account = yield* signUp(first.baseUrl)
        const created = yield* request(first.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
        const ready = yield* waitForSession(first.baseUrl, account.key, created.json.id, isReady)
        // Traffic the proxy flushes to the row (at least every second) before the crash.
        const browser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: ready.cdp_url,
            headers: { authorization: `Bearer ${account.key}` }
          })
        )
        const [tab] = yield* Effect.promise(() => browser.pages())
        yield* Effect.promise(() => tab!.goto(`${traffic.http}/page`))
        yield* Effect.promise(() =>
          tab!.evaluate(async () => (await (await fetch("/bytes?n=400000")).arrayBuffer()).byteLength)
        )
        yield* Effect.promise(() => browser.disconnect())
        const flushed = yield* waitForSession(
          first.baseUrl,
          account.key,
          created.json.id,
          (s) => s.bytes_down >= 400_000
        )
        const orphans = yield* Effect.promise(() => findProcessesUsing(profilesDir))
        assert.isAtLeast(orphans.length, 2, "the session's browser and the warm one")

        // Its browsers die with it (the spawner kills them: test/main/HardStop.test.ts); a browser that
        // outlived it all the same (its spawner killed too) would be reaped by the next start.
        yield* stop(first.child, "SIGKILL")

        const second = yield* startService(env)
        const session = yield* request(second.baseUrl, "GET", `/v1/sessions/${created.json.id}`, {
          key: account.key
        })
        assert.strictEqual(session.json.status, "closed")
        assert.strictEqual(session.json.ended_reason, "server_restart")
        assert.isString(session.json.ended_at)
        // Billed once, for what its proxy last flushed, in the transaction that closed it.
        assert.strictEqual(session.json.bytes_down, flushed.bytes_down)
        const charge = Math.floor((session.json.bytes_up + session.json.bytes_down) / 200)
        const summary = (yield* request(second.baseUrl, "GET", "/v1/billing/summary", { key: account.key }))
          .json
        assert.strictEqual(summary.balance_micro_usd, 5_000_000 - charge)
        assert.deepStrictEqual(
          summary.recent_entries
            .filter((entry: any) => entry.session_id === created.json.id)
            .map((entry: any) => entry.amount_micro_usd),
          [-charge]
        )
        for (const pid of orphans) assert.isFalse(TestService.isAlive(pid), `orphan ${pid} was killed`)
        const left = yield* Effect.promise(() => Fs.readdir(profilesDir))
        assert.strictEqual(left.length, 1, "only the new warm browser's profile")

        // SIGTERM: a graceful stop leaves nothing behind.
        const open = yield* request(second.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
        yield* waitForSession(second.baseUrl, account.key, open.json.id, isReady)
        const client = new WebSocket(open.json.cdp_url, {
          headers: { authorization: `Bearer ${account.key}` }
        })
        const closed = new Promise<{ code: number; reason: string }>((resolve) =>
          client.once("close", (code, reason) => resolve({ code, reason: reason.toString() }))
        )
        yield* Effect.promise(() => new Promise((resolve) => client.once("open", resolve)))
        assert.strictEqual(yield* stop(second.child, "SIGTERM"), 0)
        // A connected CDP client is told, with a close frame, rather than cut off.
        assert.deepStrictEqual(yield* Effect.promise(() => closed), {
          code: 1001,
          reason: "the service is stopping"
        })
        assert.deepStrictEqual(yield* Effect.promise(() => findProcessesUsing(profilesDir)), [])
        // Empty, or removed (a parent of its own outside the data dir goes once empty).
        assert.deepStrictEqual(yield* Effect.promise(() => Fs.readdir(profilesDir).catch(() => [])), [])
      }).pipe(Effect.scoped),
    180_000
  )

  it.live(
    "a second start on the same data dir reuses the embedded database, even after a crash",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        const env = { DATA_DIR: dataDir, PORT: String(yield* TestService.freePort), BROWSER_POOL_SIZE: "0" }

        const first = yield* startService(env)
        const account = yield* signUp(first.baseUrl)
        yield* stop(first.child, "SIGKILL")
        const postmaster = yield* Effect.promise(() =>
          Fs.readFile(Path.join(dataDir, "postgres", "data", "postmaster.pid"), "utf8")
        )
        const postgresPid = Number(postmaster.split("\n")[0])
        assert.isTrue(TestService.isAlive(postgresPid), "the crashed service left its Postgres running")

        const second = yield* startService(env)
        assert.isFalse(TestService.isAlive(postgresPid), "the stale Postgres was stopped")
        const login = yield* request(second.baseUrl, "POST", "/auth/login", {
          body: { email: account.email, password: account.password }
        })
        assert.strictEqual(login.status, 200, "the user registered before the crash is still there")
        const keys = yield* request(second.baseUrl, "GET", "/v1/sessions", { key: account.key })
        assert.strictEqual(keys.status, 200)

        assert.strictEqual(yield* stop(second.child, "SIGTERM"), 0)
        const stillRunning = yield* Effect.promise(() =>
          Fs.readFile(Path.join(dataDir, "postgres", "data", "postmaster.pid"), "utf8").then(
            (text) => TestService.isAlive(Number(text.split("\n")[0])),
            () => false
          )
        )
        assert.isFalse(stillRunning, "SIGTERM stops the embedded Postgres")
      }).pipe(Effect.scoped),
    180_000
  )
})
