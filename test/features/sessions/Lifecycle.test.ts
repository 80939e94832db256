import { assert, describe, it, layer } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import WebSocket from "ws"
import * as App from "../../../src/main/App.ts"
import { findProcessesUsing } from "../../../src/runtimes/browser/Chromium.ts"
import { LiveSessions } from "../../../src/runtime/LiveSessions.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

/** Waits for the session to leave `ready`, then checks its browser and profile dir are gone. */
const endedAndGone = (baseUrl: string, key: string, id: string, pid: number, profileDir: string) =>
  Effect.gen(function* () {
    const ended = yield* waitForSession(baseUrl, key, id, (s) => s.status !== "ready")
    // Teardown runs after the row is closed, off the caller's path: it finishes soon after.
    yield* waitUntil(() => !TestService.isAlive(pid))
    yield* waitUntil(() => !FsSync.existsSync(profileDir))
    return ended
  })

const waitUntil = (predicate: () => boolean, timeoutMs = 10_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    while (!predicate()) {
      if (Date.now() > deadline) return yield* Effect.die(new Error("condition never held"))
      yield* Effect.sleep("25 millis")
    }
  })

layer(TestService.layer({ browserPoolSize: 1, logLevel: "Error" as const }), { excludeTestServices: true })(
  "session lifecycle",
  (it) => {
    const readySession = Effect.gen(function* () {
      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const created = yield* request(service.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
      const session = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
      const live = (yield* LiveSessions).get(session.id)
      assert.isTrue(Option.isSome(live))
      const { runtime } = Option.getOrThrow(live)
      // The browser's profile, as it was started with it.
      const profileDir = FsSync.readFileSync(`/proc/${runtime.pid}/cmdline`, "utf8")
        .split("\0")
        .find((arg) => arg.startsWith("--user-data-dir="))
        ?.slice("--user-data-dir=".length)
      if (profileDir === undefined) return assert.fail("the browser names its profile dir")
      return { service, account, session, pid: runtime.pid, profileDir }
    })

    it.effect("a session past its TTL is closed with ttl_expired and its browser is gone", () =>
      Effect.gen(function* () {
        const { service, account, session, pid, profileDir } = yield* readySession
        assert.isTrue(TestService.isAlive(pid))
        const sql = yield* SqlClient.SqlClient
        // The node that holds the browser, and where other nodes reach it, are on the row once ready.
        const [owner] = yield* sql<{ node_id: string; node_url: string }>`
          SELECT node_id, node_url FROM sessions WHERE id = ${session.id}`
        assert.deepStrictEqual(owner, { node_id: "local", node_url: service.baseUrl })
        // Time travel for the row: the reaper sees a session past its TTL.
        yield* sql`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = ${session.id}`
        const ended = yield* endedAndGone(service.baseUrl, account.key, session.id, pid, profileDir)
        assert.strictEqual(ended.status, "closed")
        assert.strictEqual(ended.ended_reason, "ttl_expired")
        assert.isString(ended.ended_at)
      })
    )

    it.effect("a browser that dies makes the session error with browser_crashed, and clients are told", () =>
      Effect.gen(function* () {
        const { service, account, session, pid, profileDir } = yield* readySession
        const client = new WebSocket(session.cdp_url, { headers: { authorization: `Bearer ${account.key}` } })
        yield* Effect.promise(() => new Promise((resolve) => client.once("open", resolve)))
        const closed = new Promise<number>((resolve) => client.once("close", (code) => resolve(code)))

        process.kill(-pid, "SIGKILL")
        const ended = yield* endedAndGone(service.baseUrl, account.key, session.id, pid, profileDir)
        assert.strictEqual(ended.status, "error")
        assert.strictEqual(ended.ended_reason, "browser_crashed")
        assert.include([1000, 1011], yield* Effect.promise(() => closed))

        const shot = yield* request(service.baseUrl, "POST", `/v1/sessions/${session.id}/screenshot`, {
          key: account.key
        })
        assert.deepStrictEqual([shot.status, shot.json.error.code], [409, "session_not_open"])
      })
    )

    it.effect("a session whose start was lost (committed, never started) is started by the reaper", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const sql = yield* SqlClient.SqlClient
        const [key] = yield* sql<{
          account_id: string
        }>`SELECT account_id FROM api_keys WHERE id = ${account.keyId}`
        const id = "sess_00000000-0000-4000-8000-00000000beef"
        // As if the process had died right after the insert: a row, and no start message.
        yield* sql`
          INSERT INTO sessions (id, account_id, api_key_id, status, profile, device, ttl_seconds, node_id, created_at, expires_at)
          VALUES (${id}, ${key!.account_id}, ${account.keyId}, 'creating', 'default', '', 600, 'local',
            now() - interval '2 minutes', now() + interval '8 minutes')`
        const ready = yield* waitForSession(service.baseUrl, account.key, id, isReady)
        assert.isString(ready.ready_at)
        assert.strictEqual(
          (yield* request(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key: account.key })).status,
          204
        )
      })
    )

    it.effect(
      "a DELETE of another account's live session is 404 and leaves it running; the owner's ends it once",
      () =>
        Effect.gen(function* () {
          const { service, account, session, pid, profileDir } = yield* readySession
          const stranger = yield* signUp(service.baseUrl)
          // Live on this node, its actor a message away: the account is still checked first.
          const refused = yield* request(service.baseUrl, "DELETE", `/v1/sessions/${session.id}`, {
            key: stranger.key
          })
          assert.strictEqual(refused.status, 404)
          assert.strictEqual(refused.json.error.code, "session_not_found")
          const still = yield* request(service.baseUrl, "GET", `/v1/sessions/${session.id}`, {
            key: account.key
          })
          assert.strictEqual(still.json.status, "ready")
          assert.isTrue(TestService.isAlive(pid))
          const deleted = yield* request(service.baseUrl, "DELETE", `/v1/sessions/${session.id}`, {
            key: account.key
          })
          assert.strictEqual(deleted.status, 204)
          const again = yield* request(service.baseUrl, "DELETE", `/v1/sessions/${session.id}`, {
            key: account.key
          })
          assert.strictEqual(again.status, 409)
          assert.strictEqual(again.json.error.code, "session_not_open")
          const ended = yield* endedAndGone(service.baseUrl, account.key, session.id, pid, profileDir)
          assert.strictEqual(ended.ended_reason, "client_delete")
          const sql = yield* SqlClient.SqlClient
          // One end, audited once as done; the stranger's and the second attempt as refused.
          const audits = yield* sql<{ outcome: string; n: number }>`
            SELECT outcome, count(*)::int AS n FROM audit_events
            WHERE target_id = ${session.id} AND action = 'session.deleted' GROUP BY outcome ORDER BY outcome`
          assert.deepStrictEqual(
            audits.map((row) => [row.outcome, row.n]),
            [
              ["failure", 2],
              ["success", 1]
            ]
          )
        })
    )

    it.effect("the pool refills after sessions take its browsers", () =>
      Effect.gen(function* () {
        const { service } = yield* readySession
        yield* Effect.gen(function* () {
          const deadline = Date.now() + 20_000
          while (Date.now() < deadline) {
            const ready = yield* request(service.baseUrl, "GET", "/readyz")
            // At least the floor (BROWSER_POOL_SIZE 1); the adaptive target may keep more warm.
            if (ready.json?.browser_pool?.idle >= 1) return
            yield* Effect.sleep("50 millis")
          }
          return yield* Effect.die(new Error("pool never refilled"))
        })
      })
    )
  }
)

describe("no leaks", () => {
  it.live(
    "after a run of sessions and a shutdown, no Chromium process or profile dir of the service remains",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const dataDir = yield* TestService.freshDataDir
        const port = yield* TestService.freePort
        const baseUrl = `http://127.0.0.1:${port}`
        const profilesDir = TestService.profilesDirOf(dataDir)
        const config = {
          host: "127.0.0.1",
          port,
          dataDir,
          databaseUrl,
          browserPoolSize: 2,
          reaperIntervalMs: 250,
          signupCreditUsd: 5
        }

        yield* Effect.gen(function* () {
          const account = yield* signUp(baseUrl)
          const ids: Array<string> = []
          for (let i = 0; i < 6; i++) {
            const created = yield* request(baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
            ids.push(created.json.id)
          }
          for (const id of ids) yield* waitForSession(baseUrl, account.key, id, isReady)
          // Half end through the API, half are still open when the service stops.
          for (const id of ids.slice(0, 3))
            yield* request(baseUrl, "DELETE", `/v1/sessions/${id}`, { key: account.key })
          const running = yield* Effect.promise(() => findProcessesUsing(profilesDir))
          assert.isAtLeast(running.length, 3, "open sessions and the pool have browsers")
        }).pipe(Effect.provide(App.layer(config)))

        assert.deepStrictEqual(yield* Effect.promise(() => findProcessesUsing(profilesDir)), [])
        const left = yield* Effect.promise(() => Fs.readdir(profilesDir).catch(() => []))
        assert.deepStrictEqual(left, [])
        const rows = yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{ status: string; ended_reason: string }>`
            SELECT status, ended_reason FROM sessions ORDER BY ended_reason`
        }).pipe(
          Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })),
          Effect.orDie
        )
        assert.deepStrictEqual(
          rows.map((row) => `${row.status}/${row.ended_reason}`),
          [...Array(3).fill("closed/client_delete"), ...Array(3).fill("closed/server_restart")],
          "sessions open at shutdown are recorded as ended"
        )
      }).pipe(Effect.scoped),
    120_000
  )
})
