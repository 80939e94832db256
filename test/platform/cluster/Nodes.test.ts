import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { chromium } from "playwright-core"
import puppeteer from "puppeteer-core"
import WebSocket from "ws"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { refusesBinaryFrames, orderAndLargeFrames } from "../../support/CdpChecks.ts"
import * as LiveViewer from "../../support/LiveViewer.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import { until } from "../../support/Poll.ts"
import * as RedisServer from "../../support/RedisServer.ts"
import { stop } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"

import { ownerOf, placementSettled, startNode } from "../../support/Nodes.ts"

/** Polls a session's `active_connection_leases` through a node until it reads `expected` (5 s at most). */
const leasesThrough = (baseUrl: string, key: string, id: string, expected: number) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 5_000
    while (true) {
      const view = yield* request(baseUrl, "GET", `/v1/sessions/${id}`, { key })
      const leases = view.json.active_connection_leases as number
      if (leases === expected || Date.now() > deadline) return leases
      yield* Effect.sleep("100 millis")
    }
  })

describe("several nodes", () => {
  it.live(
    "three nodes place sessions by capacity, refuse with 503 when all are full, and each serves the others' sessions over REST, CDP and the live view",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        // One browser place per node: where each session goes is the placement's choice alone.
        const env = { MAX_BROWSERS: "1", LIMIT_VIEWERS_PER_SESSION: "1" }
        // One at a time: the first migrates the database.
        const a = yield* startNode(databaseUrl, env)
        const b = yield* startNode(databaseUrl, env)
        const c = yield* startNode(databaseUrl, env)
        const nodes = [a, b, c]
        // Wait until every runner serves its own shard group and every heartbeat says so.
        yield* placementSettled(databaseUrl, nodes)
        const account = yield* signUp(a.baseUrl)
        const create = (through: (typeof nodes)[number], body: object = {}) =>
          request(through.baseUrl, "POST", "/v1/sessions", { key: account.key, body })
        const placed = (through: (typeof nodes)[number], body: object = {}) =>
          Effect.gen(function* () {
            const created = yield* create(through, body)
            assert.strictEqual(created.status, 201, JSON.stringify(created.json))
            yield* waitForSession(through.baseUrl, account.key, created.json.id, isReady)
            const owner = yield* ownerOf(databaseUrl, created.json.id)
            const node = nodes.find((n) => n.nodeId === owner.node_id)
            assert.isDefined(node, `${owner.node_id} is one of the nodes`)
            assert.strictEqual(owner.node_url, node!.baseUrl)
            return { id: created.json.id as string, owner: node! }
          })

        // Created round-robin through the three, the sessions land on all three: one place each.
        const sessions = [yield* placed(a, { recording: true }), yield* placed(b), yield* placed(c)]
        const recorded = sessions[0]!
        assert.deepStrictEqual(
          sessions.map((s) => s.owner.nodeId).sort(),
          nodes.map((n) => n.nodeId).sort(),
          "one session on each node"
        )

        // Every node is full: refused at once, on any node, with when to come back.
        for (const node of nodes) {
          const full = yield* create(node)
          assert.strictEqual(full.status, 503, JSON.stringify(full.json))
          assert.strictEqual(full.json.error.code, "capacity_exhausted")
          assert.strictEqual(full.headers.get("retry-after"), "2")
        }
        // A place frees: the next session goes to that node, whichever node takes the request.
        const freed = sessions.pop()!
        assert.strictEqual(
          (yield* request(a.baseUrl, "DELETE", `/v1/sessions/${freed.id}`, { key: account.key })).status,
          204
        )
        const next = yield* placed(nodes.find((n) => n !== freed.owner)!)
        // When not, one of the others ended meanwhile (a shard move ends it: issue 25): say which and why.
        const others = yield* Effect.forEach(sessions, (s) =>
          Effect.map(request(a.baseUrl, "GET", `/v1/sessions/${s.id}`, { key: account.key }), (r) => r.json)
        )
        assert.strictEqual(
          next.owner.nodeId,
          freed.owner.nodeId,
          `the only node with room: ${JSON.stringify(others)}`
        )
        sessions.push(next)

        // Each session answers through a node that does not hold it: its view, a screenshot
        // (a message to the owner's actor), CDP over the hop (puppeteer and playwright,
        // Browser.close answered, one lease on the owner), and its end, with the reason on the socket.
        const page = yield* LocalPage.serve
        for (const { id, owner } of sessions) {
          const other = nodes[(nodes.indexOf(owner) + 1) % nodes.length]!
          const cdpUrl = `${other.baseUrl.replace("http://", "ws://")}/sessions/${id}`
          const headers = { Authorization: `Bearer ${account.key}` }
          const view = yield* request(other.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })
          assert.strictEqual(view.json.status, "ready", JSON.stringify(view.json))
          const shot = yield* request(other.baseUrl, "POST", `/v1/sessions/${id}/screenshot`, {
            key: account.key
          })
          assert.strictEqual(shot.status, 200, `${JSON.stringify(shot.json)}: ${JSON.stringify(view.json)}`)
          const browser = yield* Effect.promise(() =>
            puppeteer.connect({ browserWSEndpoint: cdpUrl, headers, defaultViewport: null })
          )
          const tab = yield* Effect.promise(() => browser.newPage())
          yield* Effect.promise(() => tab.goto(`${page}?title=through-${other.nodeId}`))
          assert.strictEqual(yield* Effect.promise(() => tab.title()), `through-${other.nodeId}`)
          // A download the page makes stays on the owner: listed and served through the other node.
          yield* Effect.promise(() =>
            tab.evaluate(`(() => {
              const link = document.createElement("a")
              link.href = URL.createObjectURL(new Blob(["kept on ${id}"]))
              link.download = "hop.txt"
              document.body.append(link)
              link.click()
            })()`)
          )
          const listedThrough = Date.now() + 10_000
          while (true) {
            const list = yield* request(other.baseUrl, "GET", `/v1/sessions/${id}/downloads`, {
              key: account.key
            })
            assert.strictEqual(list.status, 200, list.text)
            if (list.json.data.some((file: any) => file.name === "hop.txt")) break
            assert.isBelow(Date.now(), listedThrough, "the download is listed through the hop")
            yield* Effect.sleep("100 millis")
          }
          // The live view through the hop: frames of the owner's screencast, input to its page,
          // the owner's refusals (one viewer place here) passed on as they were given.
          yield* Effect.promise(() => tab.goto(`${page}counter`))
          const minted = yield* request(other.baseUrl, "POST", `/v1/sessions/${id}/preview-token`, {
            key: account.key,
            body: {}
          })
          assert.isTrue(minted.json.url.startsWith(other.baseUrl.replace("http://", "ws://")))
          const viewer = yield* LiveViewer.open(minted.json.url)
          // The newest tab comes on screen (a recorder's latest frame, of the page before, may come first).
          const shown = Date.now() + 10_000
          while (!/\/counter$/.test(viewer.frames.at(-1)?.meta.url ?? "")) {
            assert.isBelow(Date.now(), shown, "the tab the client opened last comes on screen")
            yield* Effect.sleep("20 millis")
          }
          viewer.send({ type: "click", x: 250, y: 200 })
          const deadline = Date.now() + 10_000
          while ((yield* Effect.promise(() => tab.evaluate("count.textContent"))) !== "1") {
            assert.isBelow(Date.now(), deadline, "a click through the hop reaches the page")
            yield* Effect.sleep("20 millis")
          }
          const second = yield* LiveViewer.refusal(minted.json.url)
          assert.deepStrictEqual([second.status, second.body?.error?.code], [429, "viewer_limit"])
          const leases = yield* request(owner.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })
          assert.strictEqual(leases.json.active_connection_leases, 1, "counted once, on the owner")
          // Elsewhere the lease shows as the owner last flushed it (once a second).
          assert.strictEqual(yield* leasesThrough(other.baseUrl, account.key, id, 1), 1)
          yield* Effect.promise(() => browser.close())
          assert.strictEqual(
            (yield* request(owner.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })).json.status,
            "ready",
            "Browser.close through the hop leaves the session open"
          )
          assert.strictEqual(yield* leasesThrough(other.baseUrl, account.key, id, 0), 0)
          // The single-node relay's raw checks, through the hop: order with a thousand in flight,
          // 20 MB both ways, and binary frames refused by the owner.
          yield* orderAndLargeFrames(cdpUrl, account.key)
          yield* refusesBinaryFrames(cdpUrl, account.key)
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
          assert.deepStrictEqual(yield* Effect.promise(() => viewer.closed), {
            code: 1000,
            reason: "session ended: client_delete"
          })
          const after = yield* request(a.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })
          assert.deepStrictEqual([after.json.status, after.json.ended_reason], ["closed", "client_delete"])
          const kept = yield* request(other.baseUrl, "GET", `/v1/sessions/${id}/download?path=hop.txt`, {
            key: account.key
          })
          assert.strictEqual(kept.text, `kept on ${id}`, "served through the hop after the session ended")
        }

        // The recorded session's video sits in its node's own blob store: any node serves it
        // (ranges too) through the hop, and a delete through another node removes it there.
        const away = nodes.find((n) => n !== recorded.owner)!
        const path = `/v1/sessions/${recorded.id}/recording`
        yield* waitForSession(
          away.baseUrl,
          account.key,
          recorded.id,
          (s) => s.recording?.status === "ready",
          60_000
        )
        const video = yield* request(away.baseUrl, "GET", path, { key: account.key })
        assert.strictEqual(video.status, 200, video.text.slice(0, 200))
        assert.strictEqual(video.headers.get("content-type"), "video/webm")
        assert.deepStrictEqual([...video.bytes.slice(0, 4)], [0x1a, 0x45, 0xdf, 0xa3])
        const part = yield* request(away.baseUrl, "GET", path, {
          key: account.key,
          headers: { range: "bytes=0-9" }
        })
        assert.strictEqual(part.status, 206)
        assert.strictEqual(part.headers.get("content-range"), `bytes 0-9/${video.bytes.length}`)
        assert.strictEqual((yield* request(away.baseUrl, "DELETE", path, { key: account.key })).status, 204)
        const gone = yield* request(recorded.owner.baseUrl, "GET", path, { key: account.key })
        assert.strictEqual(gone.json.error.code, "recording_not_found")

        // A context session works the same through the hop: placed by the context capacity the
        // heartbeats carry, scoped on its owner (one page, its own), screenshot and end through another node.
        const contextual = yield* placed(a, { isolation: "context" })
        const through = nodes.find((n) => n !== contextual.owner)!
        const contextUrl = `${through.baseUrl.replace("http://", "ws://")}/sessions/${contextual.id}`
        const scoped = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: contextUrl,
            headers: { Authorization: `Bearer ${account.key}` },
            defaultViewport: null
          })
        )
        const [only, ...more] = yield* Effect.promise(() => scoped.pages())
        assert.deepStrictEqual(more, [], "one blank page, its context's")
        yield* Effect.promise(() => only!.goto(`${page}?title=context-through-${through.nodeId}`))
        assert.strictEqual(yield* Effect.promise(() => only!.title()), `context-through-${through.nodeId}`)
        const contextShot = yield* request(
          through.baseUrl,
          "POST",
          `/v1/sessions/${contextual.id}/screenshot`,
          {
            key: account.key
          }
        )
        assert.strictEqual(contextShot.status, 200, contextShot.text)
        yield* Effect.promise(() => scoped.disconnect())
        assert.strictEqual(
          (yield* request(through.baseUrl, "DELETE", `/v1/sessions/${contextual.id}`, { key: account.key }))
            .status,
          204
        )
        const contextEnded = yield* request(a.baseUrl, "GET", `/v1/sessions/${contextual.id}`, {
          key: account.key
        })
        assert.deepStrictEqual(
          [contextEnded.json.isolation, contextEnded.json.status, contextEnded.json.bytes_down > 0],
          ["context", "closed", true]
        )

        for (const node of [c, b, a]) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    300_000
  )

  it.live(
    "with REDIS_URL the per-account create limit holds across three nodes",
    () =>
      Effect.gen(function* () {
        const redisUrl = yield* RedisServer.serve
        const databaseUrl = yield* TestService.freshDatabase
        const env = { REDIS_URL: redisUrl, LIMIT_SESSION_CREATES_PER_MINUTE: "3", BROWSER_POOL_SIZE: "0" }
        const a = yield* startNode(databaseUrl, env)
        const b = yield* startNode(databaseUrl, env)
        const c = yield* startNode(databaseUrl, env)
        yield* placementSettled(databaseUrl, [a, b, c])
        const account = yield* signUp(a.baseUrl)
        const statuses: Array<number> = []
        for (const node of [a, b, c, a, b]) {
          const created = yield* request(node.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
          statuses.push(created.status)
          if (created.status === 429) assert.strictEqual(created.json.error.code, "rate_limited")
        }
        assert.deepStrictEqual(
          statuses,
          [201, 201, 201, 429, 429],
          "three a minute for the account, on any node"
        )
        for (const node of [c, b, a]) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    240_000
  )

  it.live(
    "a key revoked through one node is refused at once by the others, which had it kept",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const env = { BROWSER_POOL_SIZE: "0" }
        const a = yield* startNode(databaseUrl, env)
        const b = yield* startNode(databaseUrl, env)
        const account = yield* signUp(a.baseUrl)
        // Each node authenticates the key once and keeps it.
        for (const node of [a, b])
          assert.strictEqual(
            (yield* request(node.baseUrl, "GET", "/v1/sessions", { key: account.key })).status,
            200
          )
        const revoked = yield* request(a.baseUrl, "DELETE", `/v1/keys/${account.keyId}`, {
          cookie: account.cookie
        })
        assert.strictEqual(revoked.status, 204, revoked.text)
        assert.strictEqual(
          (yield* request(a.baseUrl, "GET", "/v1/sessions", { key: account.key })).status,
          401,
          "the node that revoked it"
        )
        // The other learns it from the revocation's NOTIFY, sent at its commit.
        const elsewhere = yield* until(
          request(b.baseUrl, "GET", "/v1/sessions", { key: account.key }),
          (response) => response.status !== 200,
          2_000
        )
        assert.strictEqual(elsewhere.status, 401, "another node")
        for (const node of [b, a]) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    120_000
  )
})
