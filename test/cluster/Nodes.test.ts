import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { chromium } from "playwright-core"
import puppeteer from "puppeteer-core"
import WebSocket from "ws"
import { isReady, request, signUp, waitForSession } from "../support/Client.ts"
import * as LocalPage from "../support/LocalPage.ts"
import * as RedisServer from "../support/RedisServer.ts"
import { startService, stop } from "../support/ServiceProcess.ts"
import * as TestService from "../support/TestService.ts"

const SECRETS_KEY = "a-cluster-secret-of-forty-characters-012"

/** A node of several: its own data dir, HTTP port and runner port, the shared database and key. */
const startNode = (databaseUrl: string, env: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const runnerPort = yield* TestService.freePort
    const nodeEnv = {
      DATA_DIR: yield* TestService.freshDataDir,
      PORT: String(yield* TestService.freePort),
      DATABASE_URL: databaseUrl,
      RUNNER_ADDRESS: `127.0.0.1:${runnerPort}`,
      SECRETS_KEY,
      BROWSER_POOL_SIZE: "1",
      SIGNUP_CREDIT_USD: "5",
      // The test's pages are served on loopback.
      EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
      ...env
    }
    const node = yield* startService(nodeEnv)
    return { ...node, env: nodeEnv, nodeId: `127.0.0.1-${runnerPort}` }
  })

/** Polls the nodes' `/readyz` until together they hold all 300 shards and each holds some. */
const shardsSettled = (baseUrls: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 60_000
    while (true) {
      const shards = yield* Effect.forEach(baseUrls, (baseUrl) =>
        Effect.map(request(baseUrl, "GET", "/readyz"), (ready) => (ready.json?.node?.shards as number) ?? 0)
      )
      const total = shards.reduce((sum, n) => sum + n, 0)
      if (total === 300 && shards.every((n) => n > 0)) return shards
      if (Date.now() > deadline) return yield* Effect.die(new Error(`shards never settled: ${shards}`))
      yield* Effect.sleep("200 millis")
    }
  })

describe("several nodes", () => {
  it.live(
    "two nodes on one database split the sessions, and each serves the other's over REST and CDP",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        // One at a time: the first migrates the database.
        const a = yield* startNode(databaseUrl)
        const b = yield* startNode(databaseUrl)
        const nodes = [a, b]
        // The second runner's join moves half the shards: wait until the move is done (each
        // node's /readyz says how many it holds) before any session starts.
        const settled = yield* shardsSettled(nodes.map((node) => node.baseUrl))
        assert.isTrue(
          settled.every((shards) => shards > 0 && shards < 300),
          `shards per node: ${settled}`
        )
        const account = yield* signUp(a.baseUrl)
        const ownerOf = (id: string) =>
          Effect.gen(function* () {
            const sql = yield* SqlClient.SqlClient
            const [row] = yield* sql<{ node_id: string; node_url: string }>`
              SELECT node_id, node_url FROM sessions WHERE id = ${id}`
            return row!
          }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })))

        // Sessions land where their entity's shard lives: created through both nodes in turn,
        // some land on each (the shards are split once the second runner has joined).
        const seen = new Map<string, { id: string; through: number }>()
        for (let i = 0; i < 16 && seen.size < 2; i++) {
          const through = i % 2
          const created = yield* request(nodes[through]!.baseUrl, "POST", "/v1/sessions", {
            key: account.key,
            body: {}
          })
          assert.strictEqual(created.status, 201, JSON.stringify(created.json))
          yield* waitForSession(nodes[through]!.baseUrl, account.key, created.json.id, isReady)
          const owner = yield* ownerOf(created.json.id)
          const node = nodes.find((n) => n.nodeId === owner.node_id)
          assert.isDefined(node, `${owner.node_id} is one of the nodes`)
          assert.strictEqual(owner.node_url, node!.baseUrl)
          if (!seen.has(owner.node_id)) seen.set(owner.node_id, { id: created.json.id, through })
          else yield* request(a.baseUrl, "DELETE", `/v1/sessions/${created.json.id}`, { key: account.key })
        }
        assert.strictEqual(seen.size, 2, "sessions landed on both nodes")

        // Each session answers through the node that does not hold it: its view, a screenshot
        // (a message to the owner's actor), CDP over the hop (puppeteer and playwright,
        // Browser.close answered, one lease on the owner), and its end, with the reason on the socket.
        const page = yield* LocalPage.serve
        for (const [ownerId, { id }] of seen) {
          const other = nodes.find((n) => n.nodeId !== ownerId)!
          const owner = nodes.find((n) => n.nodeId === ownerId)!
          const cdpUrl = `${other.baseUrl.replace("http://", "ws://")}/sessions/${id}`
          const headers = { Authorization: `Bearer ${account.key}` }
          const view = yield* request(other.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })
          assert.strictEqual(view.json.status, "ready")
          const shot = yield* request(other.baseUrl, "POST", `/v1/sessions/${id}/screenshot`, {
            key: account.key
          })
          assert.strictEqual(shot.status, 200, JSON.stringify(shot.json))
          const browser = yield* Effect.promise(() =>
            puppeteer.connect({ browserWSEndpoint: cdpUrl, headers, defaultViewport: null })
          )
          const tab = yield* Effect.promise(() => browser.newPage())
          yield* Effect.promise(() => tab.goto(`${page}?title=through-${other.nodeId}`))
          assert.strictEqual(yield* Effect.promise(() => tab.title()), `through-${other.nodeId}`)
          const leases = yield* request(owner.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })
          assert.strictEqual(leases.json.active_connection_leases, 1, "counted once, on the owner")
          yield* Effect.promise(() => browser.close())
          assert.strictEqual(
            (yield* request(owner.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })).json.status,
            "ready",
            "Browser.close through the hop leaves the session open"
          )
          const played = yield* Effect.promise(() => chromium.connectOverCDP(cdpUrl, { headers }))
          const context = played.contexts()[0]!
          const playTab = yield* Effect.promise(() => context.newPage())
          yield* Effect.promise(() => playTab.goto(`${page}?title=playwright`))
          assert.strictEqual(yield* Effect.promise(() => playTab.textContent("h1")), "playwright")
          yield* Effect.promise(() => played.close())

          const raw = new WebSocket(cdpUrl, { headers })
          const closed = new Promise<{ code: number; reason: string }>((resolve) =>
            raw.once("close", (code, reason) => resolve({ code, reason: reason.toString() }))
          )
          yield* Effect.promise(() => new Promise((resolve) => raw.once("open", resolve)))

          const removed = yield* request(other.baseUrl, "DELETE", `/v1/sessions/${id}`, { key: account.key })
          assert.strictEqual(removed.status, 204)
          assert.deepStrictEqual(yield* Effect.promise(() => closed), {
            code: 1000,
            reason: "session ended: client_delete"
          })
          const after = yield* request(a.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })
          assert.deepStrictEqual([after.json.status, after.json.ended_reason], ["closed", "client_delete"])
        }

        for (const node of [b, a]) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    240_000
  )

  it.live(
    "with REDIS_URL the per-account create limit holds across nodes",
    () =>
      Effect.gen(function* () {
        const redisUrl = yield* RedisServer.serve
        const databaseUrl = yield* TestService.freshDatabase
        const env = { REDIS_URL: redisUrl, LIMIT_SESSION_CREATES_PER_MINUTE: "3", BROWSER_POOL_SIZE: "0" }
        const a = yield* startNode(databaseUrl, env)
        const b = yield* startNode(databaseUrl, env)
        const account = yield* signUp(a.baseUrl)
        const statuses: Array<number> = []
        for (const node of [a, b, a, b, a]) {
          const created = yield* request(node.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
          statuses.push(created.status)
          if (created.status === 429) assert.strictEqual(created.json.error.code, "rate_limited")
        }
        assert.deepStrictEqual(
          statuses,
          [201, 201, 201, 429, 429],
          "three a minute for the account, on any node"
        )
        for (const node of [b, a]) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    240_000
  )

  it.live(
    "a node stopped with SIGTERM ends its own sessions with server_restart and leaves the other's running",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const a = yield* startNode(databaseUrl)
        const b = yield* startNode(databaseUrl)
        yield* shardsSettled([a.baseUrl, b.baseUrl])
        const account = yield* signUp(a.baseUrl)
        const ownerOf = (id: string) =>
          Effect.gen(function* () {
            const sql = yield* SqlClient.SqlClient
            const [row] = yield* sql<{ node_id: string }>`SELECT node_id FROM sessions WHERE id = ${id}`
            return row!.node_id
          }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })))
        const onNode = new Map<string, string>()
        for (let i = 0; i < 16 && onNode.size < 2; i++) {
          const created = yield* request(a.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
          yield* waitForSession(a.baseUrl, account.key, created.json.id, isReady)
          const node = yield* ownerOf(created.json.id)
          if (!onNode.has(node)) onNode.set(node, created.json.id)
          else yield* request(a.baseUrl, "DELETE", `/v1/sessions/${created.json.id}`, { key: account.key })
        }
        assert.strictEqual(onNode.size, 2)

        assert.strictEqual(yield* stop(b.child, "SIGTERM"), 0)
        const stopped = yield* request(a.baseUrl, "GET", `/v1/sessions/${onNode.get(b.nodeId)}`, {
          key: account.key
        })
        assert.deepStrictEqual([stopped.json.status, stopped.json.ended_reason], ["closed", "server_restart"])
        const kept = onNode.get(a.nodeId)!
        const still = yield* request(a.baseUrl, "GET", `/v1/sessions/${kept}`, { key: account.key })
        assert.strictEqual(still.json.status, "ready", "the other node's session runs on")
        const shot = yield* request(a.baseUrl, "POST", `/v1/sessions/${kept}/screenshot`, {
          key: account.key
        })
        assert.strictEqual(shot.status, 200)
        assert.strictEqual(yield* stop(a.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    240_000
  )

  it.live(
    "a node killed with SIGKILL: its sessions end node_lost within 15 s, billed once, slots freed, not resurrected",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const limits = { LIMIT_CONCURRENT_SESSIONS: "2" }
        const a = yield* startNode(databaseUrl, limits)
        const b = yield* startNode(databaseUrl, limits)
        yield* shardsSettled([a.baseUrl, b.baseUrl])
        const account = yield* signUp(a.baseUrl)
        const sql = PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })
        const ownerOf = (id: string) =>
          Effect.flatMap(
            SqlClient.SqlClient,
            (client) => client<{ node_id: string }>`SELECT node_id FROM sessions WHERE id = ${id}`
          ).pipe(
            Effect.map((rows) => rows[0]!.node_id),
            Effect.provide(sql)
          )
        const onNode = new Map<string, string>()
        for (let i = 0; i < 16 && onNode.size < 2; i++) {
          const created = yield* request(a.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
          assert.strictEqual(created.status, 201, JSON.stringify(created.json))
          yield* waitForSession(a.baseUrl, account.key, created.json.id, isReady)
          const node = yield* ownerOf(created.json.id)
          if (!onNode.has(node)) onNode.set(node, created.json.id)
          else yield* request(a.baseUrl, "DELETE", `/v1/sessions/${created.json.id}`, { key: account.key })
        }
        assert.strictEqual(onNode.size, 2)
        const lost = onNode.get(b.nodeId)!
        const kept = onNode.get(a.nodeId)!

        // Traffic on the session that will be lost, flushed to its row within a second.
        const page = yield* LocalPage.serve
        const browser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: `${a.baseUrl.replace("http://", "ws://")}/sessions/${lost}`,
            headers: { Authorization: `Bearer ${account.key}` }
          })
        )
        const tab = yield* Effect.promise(() => browser.newPage())
        yield* Effect.promise(() => tab.goto(`${page}?title=before-the-crash`))
        yield* Effect.promise(() => browser.disconnect())
        yield* Effect.sleep("1500 millis")

        yield* stop(b.child, "SIGKILL")
        const killedAt = Date.now()
        let ended: any
        while (true) {
          ended = (yield* request(a.baseUrl, "GET", `/v1/sessions/${lost}`, { key: account.key })).json
          if (ended.status !== "ready") break
          assert.isBelow(Date.now() - killedAt, 20_000, "the lost node's session never ended")
          yield* Effect.sleep("250 millis")
        }
        assert.isBelow(Date.now() - killedAt, 15_000)
        assert.deepStrictEqual([ended.status, ended.ended_reason], ["error", "node_lost"])
        assert.isAbove(ended.bytes_down, 0, "its flushed egress is on the row")

        // The other node's session runs on, and the lost one's slot is free again (limit 2).
        assert.strictEqual(
          (yield* request(a.baseUrl, "GET", `/v1/sessions/${kept}`, { key: account.key })).json.status,
          "ready"
        )
        const another = yield* request(a.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
        assert.strictEqual(another.status, 201, JSON.stringify(another.json))
        yield* waitForSession(a.baseUrl, account.key, another.json.id, isReady, 20_000)

        // Billed once; the node coming back does not reopen or bill it again.
        const charges = () =>
          Effect.map(
            request(a.baseUrl, "GET", "/v1/billing/summary", { key: account.key }),
            (summary) => summary.json.recent_entries.filter((entry: any) => entry.session_id === lost).length
          )
        assert.strictEqual(yield* charges(), 1)
        const back = yield* startService(b.env)
        const after = yield* request(back.baseUrl, "GET", `/v1/sessions/${lost}`, { key: account.key })
        assert.deepStrictEqual([after.json.status, after.json.ended_reason], ["error", "node_lost"])
        assert.strictEqual(yield* charges(), 1)
        for (const node of [back, a]) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    240_000
  )

  it.live(
    "a node joining takes over shards: each live session either runs on or ends server_restart, never half of each",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const a = yield* startNode(databaseUrl, { BROWSER_POOL_SIZE: "4" })
        const account = yield* signUp(a.baseUrl)
        const ids: Array<string> = []
        for (let i = 0; i < 4; i++) {
          const created = yield* request(a.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
          yield* waitForSession(a.baseUrl, account.key, created.json.id, isReady)
          ids.push(created.json.id)
        }
        const b = yield* startNode(databaseUrl)
        yield* shardsSettled([a.baseUrl, b.baseUrl])
        const outcomes: Array<string> = []
        for (const id of ids) {
          const view = (yield* request(b.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })).json
          if (view.status === "ready") {
            const shot = yield* request(b.baseUrl, "POST", `/v1/sessions/${id}/screenshot`, {
              key: account.key
            })
            assert.strictEqual(shot.status, 200, `${id} is ready, so it works: ${JSON.stringify(shot.json)}`)
            outcomes.push("runs on")
          } else {
            assert.deepStrictEqual([view.status, view.ended_reason], ["closed", "server_restart"])
            outcomes.push("ended")
          }
        }
        assert.lengthOf(outcomes, ids.length)
        for (const node of [b, a]) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    240_000
  )
})
