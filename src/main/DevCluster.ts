import { Effect, Schedule } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Path from "node:path"
import * as EmbeddedPostgres from "../platform/db/EmbeddedPostgres.ts"
import * as PostgresProcess from "../platform/db/PostgresProcess.ts"
import * as DataDir from "../platform/files/DataDir.ts"
import { SHARD_CHECK_MS } from "../platform/cluster/NodeLiveness.ts"
import { SHARDS_PER_GROUP } from "../platform/cluster/Placement.ts"

/** What `npm run cluster` starts (from the environment; see docs/operations/several-nodes.md). */
export interface DevClusterOptions {
  /** `CLUSTER_NODES`: how many service processes. */
  readonly nodes: number
  /** `PORT`: the first node's HTTP port; the others take the next ones. */
  readonly port: number
  /** `RUNNER_PORT`: the first node's cluster runner port; the others take the next ones. */
  readonly runnerPort: number
  /** `POSTGRES_PORT`: the embedded Postgres's loopback TCP port. */
  readonly postgresPort: number
  /** `DATA_DIR`: the database, the shared key and one data dir per node under it. */
  readonly dataDir: string
  /** `REDIS_PORT`: start Debian's redis-server on this loopback port and give the nodes its `REDIS_URL`. */
  readonly redisPort?: number | undefined
  /** Passed to every node as it is (`REDIS_URL`, limits, ...). */
  readonly env: Record<string, string | undefined>
}

const log = (message: string) => process.stderr.write(`[cluster] ${message}\n`)

/** The cluster's `SECRETS_KEY`: made once, kept in the data dir (mode 0600). */
const secretsKey = (dataDir: string) =>
  Effect.promise(async () => {
    const file = Path.join(dataDir, "secrets-key")
    const existing = await Fs.readFile(file, "utf8").catch(() => undefined)
    if (existing !== undefined) return existing.trim()
    const key = Crypto.randomBytes(32).toString("base64url")
    await Fs.writeFile(file, `${key}\n`, { mode: 0o600 })
    return key
  })

/** Until the node's `/readyz` answers 200 (two minutes at most); at once if it exits. */
const waitReady = (baseUrl: string, child: ChildProcess) =>
  Effect.tryPromise(async () => {
    if (child.exitCode !== null) return `${baseUrl}: the node exited (${child.exitCode})`
    const response = await fetch(`${baseUrl}/readyz`)
    if (!response.ok) throw new Error(`${baseUrl}: not ready (${response.status} ${await response.text()})`)
    return undefined
  }).pipe(
    Effect.retry({ schedule: Schedule.spaced("200 millis"), times: 600 }),
    Effect.orDie,
    Effect.flatMap((exited) => (exited === undefined ? Effect.void : Effect.die(new Error(exited))))
  )

/** SIGINT (a stop without a drain: every node stops at once), then the exit (at once if it has exited already). */
const stopChild = (child: ChildProcess) =>
  Effect.promise(
    () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve()
        child.once("exit", () => resolve())
        child.kill("SIGINT")
      })
  )

/** redis-server on a loopback port, without persistence; stopped when the scope closes, after the nodes. */
const startRedis = (port: number) =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const child = spawn(
        "redis-server",
        ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        { stdio: ["ignore", "ignore", "inherit"] }
      )
      yield* Effect.tryPromise(async () => {
        if (child.exitCode !== null) throw new Error(`redis-server exited (${child.exitCode})`)
        await new Promise<void>((resolve, reject) => {
          const socket = Net.connect(port, "127.0.0.1", () => {
            socket.end()
            resolve()
          })
          socket.once("error", reject)
        })
      }).pipe(Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 100 }), Effect.orDie)
      return child
    }),
    stopChild
  )

/**
 * Until every runner serves its own shard group (each node's `/readyz`
 * holds all of its shards), and one shard check more, so every heartbeat
 * placement reads carries them.
 */
const waitSpread = (baseUrls: ReadonlyArray<string>) =>
  Effect.tryPromise(async () => {
    const held = await Promise.all(
      baseUrls.map(async (baseUrl) => {
        const ready = (await (await fetch(`${baseUrl}/readyz`)).json()) as { node?: { shards?: number } }
        return ready.node?.shards ?? 0
      })
    )
    if (held.some((shards) => shards !== SHARDS_PER_GROUP)) throw new Error(`shards not held yet: ${held}`)
  }).pipe(
    Effect.retry({ schedule: Schedule.spaced("200 millis"), times: 600 }),
    Effect.orDie,
    Effect.andThen(Effect.sleep(SHARD_CHECK_MS * 2))
  )

/** One node, `node src/main/main.ts` as `npm start` runs it; SIGINT and a wait for its exit when the scope closes. */
const startNode = (index: number, options: DevClusterOptions, shared: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const port = options.port + index
      const child = spawn(process.execPath, ["--experimental-strip-types", "src/main/main.ts"], {
        env: {
          ...options.env,
          ...shared,
          PORT: String(port),
          DATA_DIR: Path.join(options.dataDir, `node-${index + 1}`),
          RUNNER_ADDRESS: `127.0.0.1:${options.runnerPort + index}`,
          NODE_ID: `node-${index + 1}`
        },
        stdio: ["ignore", "inherit", "inherit"]
      })
      return { child, baseUrl: `http://127.0.0.1:${port}` }
    }),
    ({ child }) => stopChild(child)
  )

/**
 * A development cluster on this machine: one embedded Postgres on loopback
 * TCP, and `nodes` service processes on consecutive ports sharing it and one
 * generated `SECRETS_KEY` (and a Redis with `redisPort`). The first node
 * migrates the database before the others start. Closing the scope (Ctrl-C) stops the nodes, then Postgres.
 */
export const run = (options: DevClusterOptions) =>
  Effect.gen(function* () {
    // The cluster's own (its embedded Postgres's user let through), as each node's data dir is.
    const { gid } = yield* PostgresProcess.runAs.pipe(Effect.orDie)
    yield* Effect.promise(() => DataDir.secure(options.dataDir, gid))
    const postgres = yield* EmbeddedPostgres.start({
      dir: Path.join(options.dataDir, "postgres"),
      tcpPort: options.postgresPort
    })
    const shared: Record<string, string> = {
      DATABASE_URL: postgres.tcpUrl!(),
      SECRETS_KEY: yield* secretsKey(options.dataDir)
    }
    if (options.redisPort !== undefined) {
      yield* startRedis(options.redisPort)
      shared.REDIS_URL = `redis://127.0.0.1:${options.redisPort}`
      log(`redis-server on 127.0.0.1:${options.redisPort}: the nodes share their rate limits`)
    }
    const nodes: Array<{ readonly child: ChildProcess; readonly baseUrl: string }> = []
    for (let index = 0; index < options.nodes; index++) {
      const node = yield* startNode(index, options, shared)
      yield* waitReady(node.baseUrl, node.child)
      nodes.push(node)
      log(`node-${index + 1} ready at ${node.baseUrl}`)
    }
    yield* waitSpread(nodes.map((node) => node.baseUrl))
    log(`${options.nodes} nodes on one Postgres (127.0.0.1:${options.postgresPort}); Ctrl-C stops them all`)
    // Serve until interrupted, or until a node dies on its own. A node drained on purpose (SIGTERM
    // to the pid in its data dir's service.pid) exits 0, and the others run on.
    const exitOf = (child: ChildProcess) =>
      Effect.promise(
        () =>
          new Promise<number | null>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode)
            child.once("exit", (code) => resolve(code))
          })
      )
    let running = [...nodes]
    while (running.length > 0) {
      const { node, code } = yield* Effect.raceAll(
        running.map((node) => Effect.map(exitOf(node.child), (code) => ({ node, code })))
      )
      running = running.filter((other) => other !== node)
      if (code !== 0) {
        log(`${node.baseUrl} exited (${code}); stopping the cluster`)
        return
      }
      log(`${node.baseUrl} drained and exited; ${running.length} node(s) run on`)
    }
  }).pipe(Effect.scoped)
