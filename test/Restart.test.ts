import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { findProcessesUsing, killGroup } from "../src/browser/Chromium.ts"
import { isReady, request, signUp, waitForSession } from "./support/Client.ts"
import * as TestService from "./support/TestService.ts"

/** `node src/main.ts`, as `npm start` runs it, killed by the scope if the test leaves it running. */
const startService = (env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const child = spawn(process.execPath, ["src/main.ts"], {
        env: { ...process.env, LOG_LEVEL: "warn", ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stderr = ""
      child.stderr!.on("data", (chunk) => (stderr += chunk))
      child.stdout!.on("data", (chunk) => (stderr += chunk))
      const baseUrl = `http://127.0.0.1:${env.PORT}`
      const deadline = Date.now() + 60_000
      while (true) {
        const ready = yield* Effect.promise(() =>
          fetch(`${baseUrl}/readyz`).then(
            (response) => response.status === 200,
            () => false
          )
        )
        if (ready) break
        if (child.exitCode !== null || Date.now() > deadline) {
          return yield* Effect.die(new Error(`service did not start: ${stderr}`))
        }
        yield* Effect.sleep("100 millis")
      }
      return { child, baseUrl }
    }),
    // Even when a test fails half-way: stop gracefully, and leave no Chromium of it behind.
    ({ child }) =>
      Effect.gen(function* () {
        if (child.exitCode === null && child.signalCode === null) {
          yield* stop(child, "SIGTERM").pipe(
            Effect.timeout("20 seconds"),
            Effect.catch(() => stop(child, "SIGKILL"))
          )
        }
        const left = yield* Effect.promise(() => findProcessesUsing(Path.join(env.DATA_DIR!, "profiles")))
        for (const pid of left) killGroup(pid)
      })
  )

const stop = (child: ChildProcess, signal: NodeJS.Signals) =>
  Effect.promise(
    () =>
      new Promise<number | null>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode)
        child.once("exit", (code) => resolve(code))
        child.kill(signal)
      })
  )

describe("restarts", () => {
  it.live(
    "after a crash, the next start closes the old sessions with server_restart and kills their browsers",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        const profilesDir = Path.join(dataDir, "profiles")
        const env = {
          DATA_DIR: dataDir,
          DATABASE_URL: yield* TestService.freshDatabase,
          PORT: String(yield* TestService.freePort),
          BROWSER_POOL_SIZE: "1",
          SIGNUP_CREDIT_USD: "5"
        }

        const first = yield* startService(env)
        const account = yield* signUp(first.baseUrl)
        const created = yield* request(first.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
        yield* waitForSession(first.baseUrl, account.key, created.json.id, isReady)
        const orphans = yield* Effect.promise(() => findProcessesUsing(profilesDir))
        assert.isAtLeast(orphans.length, 2, "the session's browser and the warm one")

        yield* stop(first.child, "SIGKILL")
        assert.isTrue(orphans.some(TestService.isAlive), "a SIGKILLed service leaves its Chromium running")

        const second = yield* startService(env)
        const session = yield* request(second.baseUrl, "GET", `/v1/sessions/${created.json.id}`, {
          key: account.key
        })
        assert.strictEqual(session.json.status, "closed")
        assert.strictEqual(session.json.ended_reason, "server_restart")
        assert.isString(session.json.ended_at)
        for (const pid of orphans) assert.isFalse(TestService.isAlive(pid), `orphan ${pid} was killed`)
        const left = yield* Effect.promise(() => Fs.readdir(profilesDir))
        assert.strictEqual(left.length, 1, "only the new warm browser's profile")

        // SIGTERM: a graceful stop leaves nothing behind.
        const open = yield* request(second.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
        yield* waitForSession(second.baseUrl, account.key, open.json.id, isReady)
        assert.strictEqual(yield* stop(second.child, "SIGTERM"), 0)
        assert.deepStrictEqual(yield* Effect.promise(() => findProcessesUsing(profilesDir)), [])
        assert.deepStrictEqual(yield* Effect.promise(() => Fs.readdir(profilesDir)), [])
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
