import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import type { ChildProcess } from "node:child_process"
import puppeteer from "puppeteer-core"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import { startService, stop } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"

import { nodesTable, ownerOf, placementSettled, startNode } from "../../support/Nodes.ts"

type Node = Effect.Success<ReturnType<typeof startNode>>

/**
 * Creates sessions through `through` until one lands on `on`: its id. The
 * others are held until then (placement fills the emptiest node first: one
 * deleted at once would leave its node the emptiest again), then deleted.
 */
const sessionOn = (databaseUrl: string, through: Node, on: Node, key: string) =>
  Effect.gen(function* () {
    const elsewhere: Array<string> = []
    const release = Effect.forEach(
      elsewhere,
      (id) => request(through.baseUrl, "DELETE", `/v1/sessions/${id}`, { key }),
      { discard: true }
    )
    for (let i = 0; i < 12; i++) {
      const created = yield* request(through.baseUrl, "POST", "/v1/sessions", { key, body: {} })
      assert.strictEqual(created.status, 201, JSON.stringify(created.json))
      yield* waitForSession(through.baseUrl, key, created.json.id, isReady)
      if ((yield* ownerOf(databaseUrl, created.json.id)).node_id === on.nodeId) {
        yield* release
        return created.json.id as string
      }
      elsewhere.push(created.json.id)
    }
    const nodes = yield* nodesTable(databaseUrl)
    return yield* Effect.die(new Error(`no session landed on ${on.nodeId}: ${JSON.stringify(nodes)}`))
  })

/** A puppeteer client on the session, connected through `through` (the node hop when it is not the owner). */
const connect = (through: Node, id: string, key: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const browser = await puppeteer.connect({
        browserWSEndpoint: `${through.baseUrl.replace("http://", "ws://")}/sessions/${id}`,
        headers: { Authorization: `Bearer ${key}` }
      })
      let disconnected = false
      browser.on("disconnected", () => (disconnected = true))
      return { browser, tab: await browser.newPage(), disconnected: () => disconnected }
    }),
    ({ browser }) => Effect.promise(() => browser.disconnect().catch(() => {}))
  )

/** The ledger entries of one session (each end is charged once). */
const charges = (node: Node, key: string, id: string) =>
  Effect.map(
    request(node.baseUrl, "GET", "/v1/billing/summary", { key }),
    (summary) => summary.json.recent_entries.filter((entry: any) => entry.session_id === id).length
  )

const exited = (node: { readonly child: ChildProcess }) =>
  Effect.promise(
    () =>
      new Promise<number | null>((resolve) => {
        if (node.child.exitCode !== null || node.child.signalCode !== null)
          return resolve(node.child.exitCode)
        node.child.once("exit", (code) => resolve(code))
      })
  )

describe("several nodes: a node drains", () => {
  it.live(
    "SIGTERM drains a node: /readyz says draining, its session keeps working over CDP, REST and the hop, new sessions land elsewhere, and it exits soon after its last session and the last connection it relays end, billed once",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const a = yield* startNode(databaseUrl)
        const b = yield* startNode(databaseUrl, { DRAIN_SECONDS: "120" })
        yield* placementSettled(databaseUrl, [a, b])
        const account = yield* signUp(a.baseUrl)
        const page = yield* LocalPage.serve
        const id = yield* sessionOn(databaseUrl, a, b, account.key)
        // One client straight to the owner, one through the other node's hop, each with a tab of its
        // own: the screenshot is of the tab in front.
        const direct = yield* connect(b, id, account.key)
        // And a client of a session on the other node, whose connection this node relays.
        const elsewhere = yield* sessionOn(databaseUrl, a, a, account.key)
        const relayed = yield* connect(b, elsewhere, account.key)
        const hopped = yield* connect(a, id, account.key)
        yield* Effect.promise(() => direct.tab.goto(`${page}?title=before`))

        b.child.kill("SIGTERM")
        const signalledAt = Date.now()
        while (true) {
          const ready = yield* request(b.baseUrl, "GET", "/readyz")
          if (ready.status === 503) {
            assert.strictEqual(ready.json.error.code, "draining")
            break
          }
          assert.isBelow(Date.now() - signalledAt, 5_000, "/readyz never said draining")
          yield* Effect.sleep("100 millis")
        }

        // Everything about the live session goes on as before.
        const before = (yield* request(b.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })).json
        assert.strictEqual(before.status, "ready")
        for (const [i, client] of [direct, hopped].entries()) {
          assert.isFalse(client.disconnected())
          yield* Effect.promise(() => client.tab.goto(`${page}?title=during-${i}`))
          assert.strictEqual(yield* Effect.promise(() => client.tab.title()), `during-${i}`)
        }
        for (const through of [a, b]) {
          const shot = yield* request(through.baseUrl, "POST", `/v1/sessions/${id}/screenshot`, {
            key: account.key
          })
          assert.strictEqual(shot.status, 200, JSON.stringify(shot.json))
        }
        // Its egress is still metered: the pages loaded during the drain reach the row.
        yield* waitForSession(a.baseUrl, account.key, id, (s) => s.bytes_down > before.bytes_down, 10_000)

        // New sessions go to the other node, whichever node is asked.
        for (const through of [b, a, b]) {
          const created = yield* request(through.baseUrl, "POST", "/v1/sessions", {
            key: account.key,
            body: {}
          })
          assert.strictEqual(created.status, 201, JSON.stringify(created.json))
          assert.strictEqual((yield* ownerOf(databaseUrl, created.json.id)).node_id, a.nodeId)
          yield* request(a.baseUrl, "DELETE", `/v1/sessions/${created.json.id}`, { key: account.key })
        }
        assert.strictEqual(b.child.exitCode, null, "still serving its session")

        // Its last session ends, but it still relays a client's connection: it waits for that too.
        const deleted = yield* request(a.baseUrl, "DELETE", `/v1/sessions/${id}`, { key: account.key })
        assert.strictEqual(deleted.status, 204)
        yield* Effect.sleep("2 seconds")
        assert.strictEqual(b.child.exitCode, null, "still relaying a client's connection")
        yield* Effect.promise(() => relayed.tab.goto(`${page}?title=relayed`))
        assert.isFalse(relayed.disconnected())
        yield* Effect.promise(() => relayed.browser.disconnect())
        const endedAt = Date.now()
        assert.strictEqual(yield* exited(b), 0)
        assert.isBelow(Date.now() - endedAt, 10_000, "it stopped soon after its last connection ended")
        const after = (yield* request(a.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })).json
        assert.deepStrictEqual([after.status, after.ended_reason], ["closed", "client_delete"])
        assert.strictEqual(yield* charges(a, account.key, id), 1)
        const other = (yield* request(a.baseUrl, "GET", `/v1/sessions/${elsewhere}`, { key: account.key }))
          .json
        assert.strictEqual(other.status, "ready", "the other node's session runs on")
        assert.strictEqual(yield* stop(a.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    240_000
  )

  it.live(
    "at DRAIN_SECONDS the sessions still open end server_restart, billed once; a second SIGTERM ends a drain at once",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const a = yield* startNode(databaseUrl)
        const b = yield* startNode(databaseUrl, { DRAIN_SECONDS: "4" })
        yield* placementSettled(databaseUrl, [a, b])
        const account = yield* signUp(a.baseUrl)
        const page = yield* LocalPage.serve
        const id = yield* sessionOn(databaseUrl, a, b, account.key)
        const client = yield* connect(a, id, account.key)
        yield* Effect.promise(() => client.tab.goto(`${page}?title=traffic`))

        b.child.kill("SIGTERM")
        const signalledAt = Date.now()
        assert.strictEqual(yield* exited(b), 0)
        assert.isAtLeast(Date.now() - signalledAt, 4_000, "it served its session until the deadline")
        const ended = (yield* request(a.baseUrl, "GET", `/v1/sessions/${id}`, { key: account.key })).json
        assert.deepStrictEqual([ended.status, ended.ended_reason], ["closed", "server_restart"])
        assert.isAbove(ended.bytes_down, 0)
        assert.strictEqual(yield* charges(a, account.key, id), 1)

        // The node back, with a long drain: the second SIGTERM does not wait for it.
        const back = yield* startService({ ...b.env, DRAIN_SECONDS: "600" })
        const again = yield* sessionOn(databaseUrl, a, { ...b, ...back }, account.key)
        back.child.kill("SIGTERM")
        yield* Effect.sleep("1 second")
        assert.strictEqual(back.child.exitCode, null, "draining")
        const secondAt = Date.now()
        assert.strictEqual(yield* stop(back.child, "SIGTERM"), 0)
        assert.isBelow(Date.now() - secondAt, 15_000)
        const cut = (yield* request(a.baseUrl, "GET", `/v1/sessions/${again}`, { key: account.key })).json
        assert.deepStrictEqual([cut.status, cut.ended_reason], ["closed", "server_restart"])
        assert.strictEqual(yield* stop(a.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    240_000
  )

  it.live(
    "a rolling restart of three nodes, with sessions coming and going through it, ends no session: each ends as its client deleted it",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const env = {
          DRAIN_SECONDS: "60",
          LIMIT_SESSION_CREATES_PER_MINUTE: "1000",
          LIMIT_CONCURRENT_SESSIONS: "50"
        }
        const nodes = [
          yield* startNode(databaseUrl, env),
          yield* startNode(databaseUrl, env),
          yield* startNode(databaseUrl, env)
        ]
        yield* placementSettled(databaseUrl, nodes)
        const account = yield* signUp(nodes[0]!.baseUrl)
        const key = account.key

        // What a load balancer does: new clients go to a node whose /readyz is 200.
        const readyNode = Effect.gen(function* () {
          while (true) {
            for (const node of [...nodes].sort(() => Math.random() - 0.5)) {
              const ready = yield* Effect.promise(() =>
                fetch(`${node.baseUrl}/readyz`, { signal: AbortSignal.timeout(2_000) }).then(
                  (response) => response.status === 200,
                  () => false
                )
              )
              if (ready) return node
            }
            yield* Effect.sleep("100 millis")
          }
        })
        const created: Array<string> = []
        const client: Effect.Effect<void> = Effect.gen(function* () {
          const node = yield* readyNode
          const session = yield* request(node.baseUrl, "POST", "/v1/sessions", { key, body: {} })
          assert.strictEqual(session.status, 201, JSON.stringify(session.json))
          created.push(session.json.id)
          yield* waitForSession(node.baseUrl, key, session.json.id, isReady, 30_000)
          yield* Effect.sleep("2 seconds")
          const deleted = yield* request(
            (yield* readyNode).baseUrl,
            "DELETE",
            `/v1/sessions/${session.json.id}`,
            {
              key
            }
          )
          assert.strictEqual(deleted.status, 204, JSON.stringify(deleted.json))
        })
        const clients = yield* Effect.forkScoped(
          Effect.all([Effect.forever(client), Effect.forever(client)], { concurrency: 2 })
        )

        for (const [i, node] of nodes.entries()) {
          // A session of its own on the node being restarted, deleted a moment into its drain.
          const others = nodes.filter((other) => other !== node)
          const held = yield* sessionOn(databaseUrl, others[0]!, node, key)
          created.push(held)
          node.child.kill("SIGTERM")
          yield* Effect.sleep("2 seconds")
          const deleted = yield* request(others[1]!.baseUrl, "DELETE", `/v1/sessions/${held}`, { key })
          assert.strictEqual(deleted.status, 204)
          assert.strictEqual(yield* exited(node), 0)
          const back = yield* startService(node.env)
          nodes[i] = { ...node, ...back }
          yield* placementSettled(databaseUrl, nodes)
        }
        yield* Fiber.interrupt(clients)
        // The clients' last sessions, interrupted between their create and their delete: those
        // whose create was answered after the interruption too (never pushed to `created`, they
        // would hold the last stop's drain open for its DRAIN_SECONDS).
        let cursor: string | null = null
        do {
          const page: { json: { data: Array<{ id: string }>; next_cursor: string | null } } = yield* request(
            nodes[0]!.baseUrl,
            "GET",
            `/v1/sessions?limit=100${cursor === null ? "" : `&cursor=${cursor}`}`,
            { key }
          )
          for (const { id } of page.json.data) if (!created.includes(id)) created.push(id)
          cursor = page.json.next_cursor
        } while (cursor !== null)
        for (const id of created) {
          const view = (yield* request(nodes[0]!.baseUrl, "GET", `/v1/sessions/${id}`, { key })).json
          if (view.status === "creating" || view.status === "ready")
            yield* request(nodes[0]!.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })
        }
        assert.isAtLeast(created.length, 6)
        const ends = new Map<string, number>()
        for (const id of created) {
          const view = (yield* request(nodes[0]!.baseUrl, "GET", `/v1/sessions/${id}`, { key })).json
          const end = `${view.status}/${view.ended_reason}`
          ends.set(end, (ends.get(end) ?? 0) + 1)
        }
        assert.deepStrictEqual([...ends.keys()], ["closed/client_delete"], JSON.stringify([...ends]))
        for (const node of nodes) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    300_000
  )

  it.live(
    "one node run by rbs serve drains too: no new session meanwhile (503 capacity_exhausted), and it stops once its session ends",
    () =>
      Effect.gen(function* () {
        const env = {
          DATA_DIR: yield* TestService.freshDataDir,
          PORT: String(yield* TestService.freePort),
          BROWSER_POOL_SIZE: "1",
          SIGNUP_CREDIT_USD: "5",
          DRAIN_SECONDS: "120"
        }
        const service = yield* startService(env, ["bin/rbs.mjs", "serve"])
        const account = yield* signUp(service.baseUrl)
        const created = yield* request(service.baseUrl, "POST", "/v1/sessions", {
          key: account.key,
          body: {}
        })
        yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)

        service.child.kill("SIGTERM")
        const signalledAt = Date.now()
        while ((yield* request(service.baseUrl, "GET", "/readyz")).status !== 503) {
          assert.isBelow(Date.now() - signalledAt, 5_000, "/readyz never said draining")
          yield* Effect.sleep("100 millis")
        }
        const refused = yield* request(service.baseUrl, "POST", "/v1/sessions", {
          key: account.key,
          body: {}
        })
        assert.strictEqual(refused.status, 503)
        assert.strictEqual(refused.json.error.code, "capacity_exhausted")
        const shot = yield* request(service.baseUrl, "POST", `/v1/sessions/${created.json.id}/screenshot`, {
          key: account.key
        })
        assert.strictEqual(shot.status, 200)
        assert.strictEqual(service.child.exitCode, null)

        const deleted = yield* request(service.baseUrl, "DELETE", `/v1/sessions/${created.json.id}`, {
          key: account.key
        })
        assert.strictEqual(deleted.status, 204)
        assert.strictEqual(yield* exited(service), 0)
      }).pipe(Effect.scoped),
    120_000
  )
})
