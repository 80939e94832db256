import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { byRoom, type NodeRoom, Placement } from "../../../src/platform/cluster/Placement.ts"
import * as Migrations from "../../../src/platform/db/Migrations.ts"
import type { SessionType } from "../../../src/kernel/Session.ts"
import { placedSessions } from "../../../src/features/sessions/SessionsRepo.ts"
import * as TestService from "../../support/TestService.ts"

const node = (id: string, capacity: number, open: number): NodeRoom => ({ id, capacity, open })

describe("placement", () => {
  it("orders the nodes with room by free places, and leaves out the full ones", () => {
    const ordered = byRoom([node("a", 4, 3), node("full", 2, 2), node("b", 10, 2), node("c", 4, 0)])
    assert.deepStrictEqual(
      ordered.map((n) => n.id),
      ["b", "c", "a"]
    )
  })

  it("breaks ties by chance, so equal nodes share the sessions", () => {
    const first = new Set<string>()
    for (let i = 0; i < 50; i++) first.add(byRoom([node("a", 2, 0), node("b", 2, 0)])[0]!.id)
    assert.deepStrictEqual([...first].sort(), ["a", "b"])
  })

  /** A kind as placement counts it: its places, and its rows (a browser or a sandbox of its own). */
  const kindOf = (type: SessionType) => ({ kind: type, sessionType: type, isolation: "browser" as const })

  it.live(
    "never places more open sessions on a node than its capacity, however many creates race",
    () =>
      Effect.gen(function* () {
        const url = yield* TestService.freshDatabase
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const accountId = Crypto.randomUUID()
          yield* sql`INSERT INTO accounts (id, name, kind, created_at) VALUES (${accountId}, 'a', 'personal', now())`
          const held = Array.from({ length: 16 }, (_, i) => i + 1)
          yield* sql`
            INSERT INTO nodes (id, url, last_seen, capacities, shards) VALUES
              ('n1', 'http://n1', now(), '{"browser": 2, "sandbox": 1}', ${held}::int[]),
              ('n2', 'http://n2', now(), '{"browser": 1, "sandbox": 0}', ${held}::int[]),
              ('stale', 'http://s', now() - interval '1 minute', '{"browser": 50, "sandbox": 50}', ${held}::int[]),
              ('leaving', 'http://l', now(), '{}', ${held}::int[]),
              ('joining', 'http://j', now(), '{"browser": 50, "sandbox": 50}', '{}'::int[])`
          const placement = yield* Placement.make({
            nodeId: "n1",
            capacity: (kind) => (kind === "browser" ? 2 : 1),
            several: true
          })

          // As CreateSession does: read the candidates, then take a place and insert in one transaction.
          const createOf = (type: SessionType) =>
            Effect.gen(function* () {
              const kind = kindOf(type)
              const candidates = yield* placement.candidates(kind)
              return yield* sql.withTransaction(
                Effect.gen(function* () {
                  const place = yield* placement.take(kind, candidates)
                  yield* sql`
                  INSERT INTO sessions (id, account_id, status, session_type, profile, device, ttl_seconds, node_id, created_at, expires_at)
                  VALUES (${place.id}, ${accountId}, 'creating', ${type}, 'default', '', 60, ${place.nodeId}, now(), now() + interval '1 minute')`
                  // Hold the place a moment, so the racing creates overlap.
                  yield* Effect.sleep("20 millis")
                  return place
                })
              )
            }).pipe(Effect.result)
          const create = createOf("browser")

          const results = yield* Effect.all(
            Array.from({ length: 8 }, () => create),
            { concurrency: "unbounded" }
          )
          const placed = results.filter((r) => r._tag === "Success").map((r) => r.success)
          const refused = results.filter((r) => r._tag === "Failure").map((r) => r.failure)
          assert.strictEqual(placed.length, 3, "two places on n1, one on n2, none elsewhere")
          assert.deepStrictEqual(placed.map((p) => p.nodeId).sort(), ["n1", "n1", "n2"])
          for (const p of placed) assert.match(p.id, /^sess_[0-9a-f-]{36}$/)
          for (const r of refused) {
            if (r._tag !== "CapacityExhausted") return assert.fail(String(r))
            assert.strictEqual(r.code, "capacity_exhausted")
            assert.strictEqual(r.status, 503)
            assert.isAbove(r.retryAfterSeconds ?? 0, 0)
          }

          // An ended session gives its place back.
          yield* sql`UPDATE sessions SET status = 'closed', ended_reason = 'client_delete' WHERE id = ${placed.find((p) => p.nodeId === "n2")!.id}`
          const again = yield* create
          assert.strictEqual(again._tag === "Success" && again.success.nodeId, "n2")

          // Places are per kind: with every browser place taken, a sandbox still has one on n1, and only one.
          const sandboxes = yield* Effect.all([createOf("sandbox"), createOf("sandbox")], {
            concurrency: "unbounded"
          })
          assert.deepStrictEqual(
            sandboxes.map((r) => (r._tag === "Success" ? r.success.nodeId : r.failure._tag)).sort(),
            ["CapacityExhausted", "n1"]
          )
          const stillFull = yield* create
          assert.strictEqual(stillFull._tag, "Failure", "a sandbox takes no browser place")

          // Affinity: only the node named, while it lives and has room.
          yield* sql`UPDATE sessions SET status = 'closed', ended_reason = 'client_delete' WHERE node_id = 'n1'`
          const pinned = yield* placement.candidates(kindOf("browser"), "n1")
          assert.deepStrictEqual(
            pinned.map((n) => n.id),
            ["n1"]
          )
          const fullNode = yield* Effect.flip(placement.candidates(kindOf("browser"), "n2"))
          assert.strictEqual(fullNode._tag, "CapacityExhausted", "n2's one browser place is taken")
          const staleNode = yield* Effect.flip(placement.candidates(kindOf("browser"), "stale"))
          assert.strictEqual(staleNode._tag, "CapacityExhausted", "no recent heartbeat, no place")
          assert.isTrue(yield* placement.isLive("n2"))
          assert.isFalse(yield* placement.isLive("stale"))
          assert.isFalse(yield* placement.isLive("joining"), "its runner does not serve its group yet")

          // One node: this node is the only candidate, with its own capacity.
          const single = yield* Placement.make({ nodeId: "n2", capacity: () => 1, several: false })
          const full = yield* Effect.flip(single.candidates(kindOf("browser")))
          assert.strictEqual(full._tag, "CapacityExhausted")
        }).pipe(
          Effect.provide(
            placedSessions.pipe(
              Layer.provideMerge(Migrations.layer()),
              Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 10 }))
            )
          )
        )
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "tells a kind no live node runs (session_type_unavailable) from one every node is full of or may run soon (capacity_exhausted)",
    () =>
      Effect.gen(function* () {
        const url = yield* TestService.freshDatabase
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const held = Array.from({ length: 16 }, (_, i) => i + 1)
          // n2 beats from an older version, which has no sandbox pool: it runs none either.
          yield* sql`
            INSERT INTO nodes (id, url, last_seen, capacities, shards) VALUES
              ('n1', 'http://n1', now(), '{"browser": 2, "sandbox": 0}', ${held}::int[]),
              ('n2', 'http://n2', now(), '{"browser": 1}', ${held}::int[]),
              ('stale', 'http://s', now() - interval '1 minute', '{"sandbox": 50}', ${held}::int[])`
          const why = "runc was not found at /x: install it"
          const placement = yield* Placement.make({
            nodeId: "n1",
            capacity: (kind) => (kind === "browser" ? 2 : 0),
            unavailable: (kind) => (kind === "sandbox" ? why : undefined),
            several: true
          })
          const refusal = (kind: SessionType, only?: string) =>
            Effect.map(Effect.flip(placement.candidates(kindOf(kind), only)), (error) => [
              error._tag,
              error.message
            ])

          const none = [
            "SessionKindUnavailable",
            `No node of this service runs sandbox sessions (this node: ${why}).`
          ]
          assert.deepStrictEqual(yield* refusal("sandbox"), none)
          assert.deepStrictEqual(yield* refusal("sandbox", "n1"), none, "a pinned create alike")
          const browsers = yield* placement.candidates(kindOf("browser"))
          assert.deepStrictEqual(
            browsers.map((n) => n.id).sort(),
            ["n1", "n2"],
            "browsers are placed as before"
          )

          // A node that may run the kind soon: joining (its runner holds no shard yet), or draining
          // (its beat carries no places at all). Waiting may cure it: capacity_exhausted.
          yield* sql`
            INSERT INTO nodes (id, url, last_seen, capacities, shards)
            VALUES ('joining', 'http://j', now(), '{"sandbox": 2}', '{}'::int[])`
          assert.deepStrictEqual(yield* refusal("sandbox"), [
            "CapacityExhausted",
            "No sandbox capacity is free; retry later."
          ])
          yield* sql`UPDATE nodes SET capacities = '{}', shards = ${held}::int[] WHERE id = 'joining'`
          assert.strictEqual((yield* refusal("sandbox"))[0], "CapacityExhausted", "a draining node")
          yield* sql`DELETE FROM nodes WHERE id = 'joining'`
          assert.deepStrictEqual(yield* refusal("sandbox"), none)

          // One node: this one, unless it runs none of the kind; with no reason (draining), it is full.
          const single = yield* Placement.make({
            nodeId: "n1",
            capacity: () => 0,
            unavailable: (kind) => (kind === "sandbox" ? why : undefined),
            several: false
          })
          const alone = yield* Effect.flip(single.candidates(kindOf("sandbox")))
          assert.deepStrictEqual(
            [alone._tag, alone.message, alone.status, alone.code],
            [
              "SessionKindUnavailable",
              `This service runs no sandbox sessions: ${why}.`,
              503,
              "session_type_unavailable"
            ]
          )
          assert.strictEqual(
            (yield* Effect.flip(single.candidates(kindOf("browser"))))._tag,
            "CapacityExhausted"
          )
        }).pipe(
          Effect.provide(
            placedSessions.pipe(
              Layer.provideMerge(Migrations.layer()),
              Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 }))
            )
          )
        )
      }).pipe(Effect.scoped),
    60_000
  )
})
