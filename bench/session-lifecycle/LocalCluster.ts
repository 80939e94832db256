// A local cluster for the benches: `npm run cluster` (src/devCluster.ts) in a
// temporary data dir, and what a bench needs to know about it.
import { spawn } from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { freePort, sleep } from "./TargetService.ts"

export interface BenchCluster {
  /** Each node's HTTP base URL, node-1 first. */
  readonly nodes: ReadonlyArray<string>
  readonly dataDir: string
  /** The nodes of the sessions `ids` ran on, by id (`node_url` of each row). */
  readonly ownersOf: (ids: ReadonlyArray<string>) => Promise<Map<string, string>>
  /** SIGTERM to the cluster (its nodes, then Postgres), and the data dir removed. */
  readonly stop: () => Promise<void>
}

/** `count` nodes on one embedded Postgres; `env` goes to every node (limits, pool size). */
export const startCluster = async (count: number, env: Record<string, string>): Promise<BenchCluster> => {
  const dataDir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-bench-cluster-"))
  await Fs.chmod(dataDir, 0o755)
  // The nodes take consecutive ports from the first.
  let port = await freePort()
  while (port > 65535 - count) port = await freePort()
  const postgresPort = await freePort()
  const cluster = spawn(process.execPath, ["--experimental-strip-types", "src/devCluster.ts"], {
    env: {
      ...process.env,
      CLUSTER_NODES: String(count),
      PORT: String(port),
      RUNNER_PORT: String(await freePort()),
      POSTGRES_PORT: String(postgresPort),
      DATA_DIR: dataDir,
      LOG_LEVEL: "warn",
      SIGNUP_CREDIT_USD: "1000",
      EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
      ...env
    },
    stdio: ["ignore", "ignore", "pipe"]
  })
  const exited = new Promise<void>((resolve) => cluster.once("exit", () => resolve()))
  const stop = async () => {
    if (cluster.exitCode === null && cluster.signalCode === null) cluster.kill("SIGTERM")
    await exited
    await Fs.rm(dataDir, { recursive: true, force: true, maxRetries: 3 })
  }
  try {
    let output = ""
    cluster.stderr!.on("data", (chunk) => (output += chunk))
    while (!output.includes(`${count} nodes on one Postgres`)) {
      if (cluster.exitCode !== null) throw new Error(`the cluster did not start: ${output}`)
      await sleep(200)
    }
  } catch (error) {
    await stop()
    throw error
  }
  const ownersOf = (ids: ReadonlyArray<string>) =>
    Effect.runPromise(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ id: string; node_url: string }>`
          SELECT id, node_url FROM sessions WHERE id IN ${sql.in(ids)}`
        return new Map(rows.map((row) => [row.id, row.node_url]))
      }).pipe(
        Effect.provide(
          PgClient.layer({
            url: Redacted.make(`postgresql://postgres@127.0.0.1:${postgresPort}/postgres`),
            maxConnections: 1
          })
        )
      )
    )
  return {
    nodes: Array.from({ length: count }, (_, i) => `http://127.0.0.1:${port + i}`),
    dataDir,
    ownersOf,
    stop
  }
}
