import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import puppeteer, { type Browser, type Page } from "puppeteer-core"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import { startService, stop } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"

import {
  defaultShardsTaken,
  HEARTBEAT_MS,
  ownerOf,
  placementSettled,
  startNode,
  timings
} from "../../support/Nodes.ts"

describe("several nodes: a node stops or joins", () => {
  it.live(
    "a node stopped with SIGTERM ends its own sessions with server_restart and leaves the other's running",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const a = yield* startNode(databaseUrl)
        const b = yield* startNode(databaseUrl)
        yield* placementSettled(databaseUrl, [a, b])
        const account = yield* signUp(a.baseUrl)
        const onNode = new Map<string, string>()
        for (let i = 0; i < 16 && onNode.size < 2; i++) {
          const created = yield* request(a.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
          yield* waitForSession(a.baseUrl, account.key, created.json.id, isReady)
          const node = (yield* ownerOf(databaseUrl, created.json.id)).node_id
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
    "one of three nodes killed with SIGKILL: its sessions end node_lost within 4 beats of silence and a sweep, billed once, slots freed, not resurrected; the others run on",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const limits = { LIMIT_CONCURRENT_SESSIONS: "3" }
        const a = yield* startNode(databaseUrl, limits)
        const b = yield* startNode(databaseUrl, limits)
        const c = yield* startNode(databaseUrl, limits)
        yield* placementSettled(databaseUrl, [a, b, c])
        const account = yield* signUp(a.baseUrl)
        // Equal nodes: placement puts three sessions on three nodes.
        const onNode = new Map<string, string>()
        for (let i = 0; i < 3; i++) {
          const created = yield* request(a.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
          assert.strictEqual(created.status, 201, JSON.stringify(created.json))
          yield* waitForSession(a.baseUrl, account.key, created.json.id, isReady)
          onNode.set((yield* ownerOf(databaseUrl, created.json.id)).node_id, created.json.id)
        }
        assert.strictEqual(onNode.size, 3, "one session on each node")
        const lost = onNode.get(b.nodeId)!
        const kept = [onNode.get(a.nodeId)!, onNode.get(c.nodeId)!]

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
        yield* waitForSession(a.baseUrl, account.key, lost, (s) => s.bytes_down > 0, 10_000)

        yield* stop(b.child, "SIGKILL")
        const killedAt = Date.now()
        // A client deleting it meanwhile: the message to its node's actor has nowhere to go, and the
        // request ends when the loss does, with what the row then says.
        const deleting = yield* Effect.forkScoped(
          request(a.baseUrl, "DELETE", `/v1/sessions/${lost}`, { key: account.key })
        )
        let ended: any
        while (true) {
          ended = (yield* request(a.baseUrl, "GET", `/v1/sessions/${lost}`, { key: account.key })).json
          if (ended.status !== "ready") break
          assert.isBelow(Date.now() - killedAt, 30_000, "the lost node's session never ended")
          yield* Effect.sleep("250 millis")
        }
        // Silent for 4 beats, then one sweep (a beat) and one beat of slack; 3 s more for a busy machine.
        assert.isBelow(Date.now() - killedAt, timings.nodeLostAfterMs + 2 * HEARTBEAT_MS + 3_000)
        assert.deepStrictEqual([ended.status, ended.ended_reason], ["error", "node_lost"])
        assert.isAbove(ended.bytes_down, 0, "its flushed egress is on the row")
        const deleted = yield* Fiber.join(deleting)
        assert.strictEqual(deleted.status, 409, JSON.stringify(deleted.json))
        assert.strictEqual(deleted.json.error.code, "session_not_open")
        assert.isBelow(Date.now() - killedAt, 20_000)

        // The other nodes' sessions run on (each answers a screenshot through another node), and
        // the lost one's slot is free again (limit 3).
        for (const [id, through] of [
          [kept[0]!, c],
          [kept[1]!, a]
        ] as const) {
          const view = yield* request(through.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })
          assert.strictEqual(view.json.status, "ready", JSON.stringify(view.json))
          const shot = yield* request(through.baseUrl, "POST", `/v1/sessions/${id}/screenshot`, {
            key: account.key
          })
          assert.strictEqual(shot.status, 200)
        }
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
        for (const node of [back, c, a]) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    240_000
  )

  it.live(
    "a node joining moves no session: each stays ready on its node, its browser and its connected client working; new sessions land on the new node",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const env = { BROWSER_POOL_SIZE: "2", MAX_BROWSERS: "3" }
        const a = yield* startNode(databaseUrl, env)
        const b = yield* startNode(databaseUrl, env)
        yield* placementSettled(databaseUrl, [a, b])
        const account = yield* signUp(a.baseUrl)
        const page = yield* LocalPage.serve

        // Four live sessions over both nodes, a puppeteer client connected to each through node a.
        const live: Array<{
          id: string
          node: string
          browser: Browser
          tab: Page
          disconnected: () => boolean
        }> = []
        for (let i = 0; i < 4; i++) {
          const created = yield* request(a.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
          assert.strictEqual(created.status, 201, JSON.stringify(created.json))
          yield* waitForSession(a.baseUrl, account.key, created.json.id, isReady)
          const browser = yield* Effect.promise(() =>
            puppeteer.connect({
              browserWSEndpoint: `${a.baseUrl.replace("http://", "ws://")}/sessions/${created.json.id}`,
              headers: { Authorization: `Bearer ${account.key}` }
            })
          )
          let gone = false
          browser.on("disconnected", () => (gone = true))
          const tab = yield* Effect.promise(() => browser.newPage())
          yield* Effect.promise(() => tab.goto(`${page}?title=before-${i}`))
          live.push({
            id: created.json.id,
            node: (yield* ownerOf(databaseUrl, created.json.id)).node_id,
            browser,
            tab,
            disconnected: () => gone
          })
        }
        assert.deepStrictEqual(new Set(live.map((s) => s.node)), new Set([a.nodeId, b.nodeId]))

        // A third node joins, and its runner takes its share of the default group's shards from the others.
        const c = yield* startNode(databaseUrl, env)
        yield* placementSettled(databaseUrl, [a, b, c])
        yield* defaultShardsTaken(databaseUrl, c)

        for (const [i, session] of live.entries()) {
          const view = (yield* request(c.baseUrl, "GET", `/v1/sessions/${session.id}`, { key: account.key }))
            .json
          assert.strictEqual(view.status, "ready", `${session.id}: ${JSON.stringify(view)}`)
          assert.strictEqual(
            (yield* ownerOf(databaseUrl, session.id)).node_id,
            session.node,
            "on the same node"
          )
          assert.isFalse(session.disconnected(), "the client's connection was never cut")
          // The same browser: the page the client opened before the join is still there.
          assert.strictEqual(yield* Effect.promise(() => session.tab.title()), `before-${i}`)
          yield* Effect.promise(() => session.tab.goto(`${page}?title=after-${i}`))
          assert.strictEqual(yield* Effect.promise(() => session.tab.title()), `after-${i}`)
          const shot = yield* request(c.baseUrl, "POST", `/v1/sessions/${session.id}/screenshot`, {
            key: account.key
          })
          assert.strictEqual(shot.status, 200)
        }

        // The new node has the most free places: the next session goes there.
        const next = yield* request(b.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
        assert.strictEqual(next.status, 201, JSON.stringify(next.json))
        yield* waitForSession(b.baseUrl, account.key, next.json.id, isReady)
        assert.strictEqual((yield* ownerOf(databaseUrl, next.json.id)).node_id, c.nodeId)

        // Ended as clients end them: through any node, each by its own actor.
        for (const session of live) {
          yield* Effect.promise(() => session.browser.disconnect())
          const deleted = yield* request(c.baseUrl, "DELETE", `/v1/sessions/${session.id}`, {
            key: account.key
          })
          assert.strictEqual(deleted.status, 204, JSON.stringify(deleted.json))
        }
        for (const node of [c, b, a]) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    240_000
  )
})
