import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { chromium } from "playwright-core"
import puppeteer from "puppeteer-core"
import WebSocket from "ws"
import { isReady, request, signUp, waitForSession } from "../support/Client.ts"
import * as LocalPage from "../support/LocalPage.ts"
import * as RedisServer from "../support/RedisServer.ts"
import { stop } from "../support/ServiceProcess.ts"
import * as TestService from "../support/TestService.ts"

import { ownerOf, shardsSettled, startNode } from "../support/Nodes.ts"

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
          const owner = yield* ownerOf(databaseUrl, created.json.id)
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
})
