// Several service nodes on one database, for the cluster tests.
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { SHARDS_PER_GROUP } from "../../src/platform/cluster/Placement.ts"
import { clusterTimings } from "../../src/platform/config/Config.ts"
import { request } from "./Client.ts"
import { startService } from "./ServiceProcess.ts"
import * as TestService from "./TestService.ts"

export const SECRETS_KEY = "a-cluster-secret-of-forty-characters-012"

/**
 * The nodes' beat here: half the default, so a lost node, a lapsed shard lease
 * and a join are seen twice as soon; long enough that a node stalled on a
 * busy test machine is not taken for lost.
 */
export const HEARTBEAT_MS = 1_000
export const timings = clusterTimings(HEARTBEAT_MS)

/** A node of several: its own data dir, HTTP port and runner port, the shared database and key. */
export const startNode = (databaseUrl: string, env: Record<string, string> = {}) =>
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
      // A test that stops a node ends its sessions at once unless it tests the drain.
      DRAIN_SECONDS: "0",
      NODE_HEARTBEAT_MS: String(HEARTBEAT_MS),
      ...env
    }
    const node = yield* startService(nodeEnv)
    return { ...node, env: nodeEnv, nodeId: `127.0.0.1-${runnerPort}` }
  })

/**
 * Polls the nodes' `/readyz` until each runner holds every shard of its own
 * group (`SHARDS_PER_GROUP`): from then on a session placed there starts.
 */
export const shardsSettled = (nodes: ReadonlyArray<{ readonly baseUrl: string; readonly nodeId: string }>) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 60_000
    while (true) {
      const shards = yield* Effect.forEach(nodes, (node) =>
        Effect.map(
          request(node.baseUrl, "GET", "/readyz"),
          (ready) => (ready.json?.node?.shards as number) ?? 0
        )
      )
      if (shards.every((n) => n === SHARDS_PER_GROUP)) return shards
      if (Date.now() > deadline) return yield* Effect.die(new Error(`shards never settled: ${shards}`))
      yield* Effect.sleep("200 millis")
    }
  })

/** The node a session's row names (the one that took its browser). */
export const ownerOf = (databaseUrl: string, id: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ node_id: string; node_url: string }>`
      SELECT node_id, node_url FROM sessions WHERE id = ${id}`
    return row!
  }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })))

/**
 * Polls the `nodes` table until every node's heartbeat carries the shards its
 * `/readyz` reports: from then on placement reads the settled split.
 */
export const placementSettled = (
  databaseUrl: string,
  nodes: ReadonlyArray<{ readonly baseUrl: string; readonly nodeId: string }>
) =>
  Effect.gen(function* () {
    const settled = yield* shardsSettled(nodes)
    const sql = yield* SqlClient.SqlClient
    const deadline = Date.now() + 30_000
    while (true) {
      const rows = yield* sql<{ id: string; shards: number }>`
        SELECT id, cardinality(shards) AS shards FROM nodes WHERE last_seen > now() - make_interval(secs => ${timings.placeableWithinMs / 1000})`
      const beats = nodes.map((node) => rows.find((row) => row.id === node.nodeId)?.shards ?? 0)
      if (beats.every((shards, i) => shards === settled[i])) return settled
      if (Date.now() > deadline) return yield* Effect.die(new Error(`heartbeats ${beats}, readyz ${settled}`))
      yield* Effect.sleep("200 millis")
    }
  }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })))

/**
 * Polls effect/cluster's shard locks until `node`'s runner holds some of the
 * `default` group's shards: the join has moved shards from the other runners.
 */
export const defaultShardsTaken = (databaseUrl: string, node: { readonly nodeId: string }) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const address = node.nodeId.replace(/-(?=\d+$)/, ":")
    const deadline = Date.now() + 60_000
    while (true) {
      const [row] = yield* sql<{ held: number }>`
        SELECT count(*)::int AS held FROM cluster_locks
        WHERE shard_id LIKE 'default:%' AND address = ${address}`
      if (row!.held > 0) return row!.held
      if (Date.now() > deadline) return yield* Effect.die(new Error(`${address} never took a default shard`))
      yield* Effect.sleep("200 millis")
    }
  }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })))

/** The `nodes` table as placement reads it (for a failing test's message). */
export const nodesTable = (databaseUrl: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql`
      SELECT id, capacity, cardinality(shards) AS shards, round(extract(epoch FROM now() - last_seen) * 1000) AS silent_ms,
        (SELECT count(*)::int FROM sessions s WHERE s.node_id = n.id AND s.status = 'creating') AS creating,
        (SELECT count(*)::int FROM sessions s WHERE s.node_id = n.id AND s.status = 'ready') AS ready
      FROM nodes n ORDER BY id`
  }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })))
