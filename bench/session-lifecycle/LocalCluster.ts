// A local cluster for the benches: `npm run cluster` (src/main/cluster.ts) in a
// temporary data dir, and what a bench needs to know about it.
import { type ChildProcess, spawn } from "node:child_process"
import { createWriteStream, writeFileSync } from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { freePort, sleep } from "./TargetService.ts"

/** The cluster's output (its nodes' warnings) of the last run. */
export const LOG_FILE = Path.join(Os.tmpdir(), "rbs-bench-cluster.log")

export interface BenchCluster {
  /** Each node's HTTP base URL, node-1 first. */
  readonly nodes: ReadonlyArray<string>
  readonly dataDir: string
  /** The nodes of the sessions `ids` ran on, by id (`node_url` of each row). */
  readonly ownersOf: (ids: ReadonlyArray<string>) => Promise<Map<string, string>>
  /** The ended reasons of the sessions `ids`, counted. */
  readonly endsOf: (ids: ReadonlyArray<string>) => Promise<Map<string, number>>
  /** One node more, `node src/main/main.ts` on the cluster's Postgres and key: its base URL once ready. */
  readonly join: (env: Record<string, string>) => Promise<string>
  /** SIGTERM to a node (its drain) by its base URL: resolves when it has exited, with the seconds it took. */
  readonly drain: (baseUrl: string) => Promise<number>
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
  const cluster = spawn(process.execPath, ["--experimental-strip-types", "src/main/cluster.ts"], {
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
    stdio: ["ignore", "pipe", "pipe"]
  })
  const exited = new Promise<void>((resolve) => cluster.once("exit", () => resolve()))
  const joined: Array<ChildProcess> = []
  const stop = async () => {
    for (const child of joined) {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT")
      await new Promise<void>((resolve) =>
        child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())
      )
    }
    if (cluster.exitCode === null && cluster.signalCode === null) cluster.kill("SIGTERM")
    await exited
    await Fs.rm(dataDir, { recursive: true, force: true, maxRetries: 3 })
  }
  try {
    let output = ""
    // Every node's warnings, kept after the run (the data dir is removed): what a failure was.
    writeFileSync(LOG_FILE, "")
    const log = createWriteStream(LOG_FILE, { flags: "a" })
    for (const stream of [cluster.stderr!, cluster.stdout!])
      stream.on("data", (chunk) => {
        if (output.length < 1_000_000) output += chunk
        log.write(chunk)
      })
    while (!output.includes(`${count} nodes on one Postgres`)) {
      if (cluster.exitCode !== null) throw new Error(`the cluster did not start: ${output}`)
      await sleep(200)
    }
  } catch (error) {
    await stop()
    throw error
  }
  const databaseUrl = `postgresql://postgres@127.0.0.1:${postgresPort}/postgres`
  const query = <A>(run: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
    Effect.runPromise(
      Effect.flatMap(SqlClient.SqlClient, run).pipe(
        Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 }))
      )
    )
  const ownersOf = (ids: ReadonlyArray<string>) =>
    query((sql) =>
      Effect.map(
        sql<{ id: string; node_url: string }>`SELECT id, node_url FROM sessions WHERE id IN ${sql.in(ids)}`,
        (rows) => new Map(rows.map((row) => [row.id, row.node_url]))
      )
    )
  const endsOf = (ids: ReadonlyArray<string>) =>
    query((sql) =>
      Effect.map(
        sql<{ ended: string; count: number }>`
          SELECT status || '/' || coalesce(ended_reason, '-') AS ended, count(*)::int AS count
          FROM sessions WHERE id IN ${sql.in(ids)} GROUP BY 1`,
        (rows) => new Map(rows.map((row) => [row.ended, row.count]))
      )
    )
  const nodes = Array.from({ length: count }, (_, i) => `http://127.0.0.1:${port + i}`)

  const join = async (nodeEnv: Record<string, string>) => {
    const index = count + joined.length + 1
    const nodePort = await freePort()
    const child = spawn(process.execPath, ["--experimental-strip-types", "src/main/main.ts"], {
      env: {
        ...process.env,
        LOG_LEVEL: "warn",
        SIGNUP_CREDIT_USD: "1000",
        EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
        ...env,
        ...nodeEnv,
        PORT: String(nodePort),
        DATA_DIR: Path.join(dataDir, `node-${index}`),
        DATABASE_URL: databaseUrl,
        SECRETS_KEY: (await Fs.readFile(Path.join(dataDir, "secrets-key"), "utf8")).trim(),
        RUNNER_ADDRESS: `127.0.0.1:${await freePort()}`,
        NODE_ID: `node-${index}`
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    joined.push(child)
    const log = createWriteStream(LOG_FILE, { flags: "a" })
    child.stdout!.pipe(log)
    child.stderr!.pipe(log)
    const baseUrl = `http://127.0.0.1:${nodePort}`
    while ((await fetch(`${baseUrl}/readyz`).catch(() => undefined))?.status !== 200) {
      if (child.exitCode !== null) throw new Error(`node-${index} exited (${child.exitCode})`)
      await sleep(200)
    }
    return baseUrl
  }

  const drain = async (baseUrl: string) => {
    const index = nodes.indexOf(baseUrl)
    const dir = index >= 0 ? `node-${index + 1}` : undefined
    if (dir === undefined) throw new Error(`${baseUrl} is not one of the cluster's first nodes`)
    const pid = Number((await Fs.readFile(Path.join(dataDir, dir, "service.pid"), "utf8")).trim())
    const started = performance.now()
    process.kill(pid, "SIGTERM")
    // Gone when signal 0 finds no such process.
    while (true) {
      try {
        process.kill(pid, 0)
      } catch {
        return (performance.now() - started) / 1000
      }
      await sleep(100)
    }
  }
  return { nodes, dataDir, ownersOf, endsOf, join, drain, stop }
}
