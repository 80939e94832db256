import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { readFileSync } from "node:fs"
import * as Fs from "node:fs/promises"
import { unmount as unmountUnder } from "../../src/features/workspaces/WorkspaceDisk.ts"
import * as Net from "node:net"
import * as Path from "node:path"
import { inject } from "vitest"
import * as App from "../../src/main/App.ts"
import { IMAGES_DIR } from "./Images.ts"
import type { ServiceConfigInput } from "../../src/platform/config/Config.ts"
import { profilesPlace } from "../../src/runtimes/browser/ProfilesPlace.ts"

export const TEST_ROOT = Path.resolve(".test-data")
export { IMAGES_DIR }

/** Nothing listens on `port` of 127.0.0.1 now. */
export const isFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = Net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/** Ports this process has handed out: never twice, though the first is not bound yet. */
const handedOut = new Set<number>()

/**
 * This worker's share of the ports below the kernel's ephemeral range: files
 * run `TEST_WORKERS` at a time (`VITEST_POOL_ID` 1, 2, ...; `vitest.config.ts`),
 * and a port one worker found free is never handed to another before its
 * process binds it.
 */
const WORKERS = Math.max(1, Number(process.env.TEST_WORKERS ?? "1"))
const SHARE = Math.floor(12_000 / WORKERS)
const shareStart = 20_000 + ((Number(process.env.VITEST_POOL_ID ?? "1") - 1) % WORKERS) * SHARE

/**
 * A free port whose next `count - 1` are free too, below the kernel's
 * ephemeral range (32768 and up): a socket another test opens meanwhile is
 * never handed one of them before the process it is for binds it (a port
 * from `listen(0)`, closed again, can be).
 */
export const freePorts = (count: number) =>
  Effect.promise(async () => {
    while (true) {
      const port = shareStart + Math.floor(Math.random() * (SHARE - count))
      const range = Array.from({ length: count }, (_, i) => port + i)
      if (range.some((p) => handedOut.has(p))) continue
      if ((await Promise.all(range.map(isFree))).every(Boolean)) {
        for (const p of range) handedOut.add(p)
        return port
      }
    }
  })

/** A free port for a process to bind later (see `freePorts`). */
export const freePort = freePorts(1)

const withDatabase = (url: string, name: string) => {
  const parsed = new URL(url)
  parsed.pathname = `/${name}`
  return parsed.toString()
}

/** A fresh database in the run's Postgres, dropped when the scope closes. */
export const freshDatabase = Effect.gen(function* () {
  const admin = inject("adminDatabaseUrl")
  const name = `t_${Crypto.randomBytes(6).toString("hex")}`
  const run = (statement: string) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(statement)
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(admin), maxConnections: 1 })), Effect.orDie)
  yield* Effect.acquireRelease(run(`CREATE DATABASE ${name}`), () =>
    run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  )
  return withDatabase(admin, name)
})

/** A data dir of its own (profiles, secrets), removed when the scope closes. */
export const freshDataDir = Effect.acquireRelease(
  Effect.promise(async () => {
    await Fs.mkdir(Path.join(TEST_ROOT, "runs"), { recursive: true })
    const dir = await Fs.mkdtemp(Path.join(TEST_ROOT, "runs", "svc-"))
    // An embedded Postgres run as the postgres user must reach its data dir.
    await Fs.chmod(dir, 0o755)
    return dir
  }),
  // A service killed in the test leaves its workspace disks mounted (its next start, or rbs cleanup,
  // would take them down): unmounted first, so the removal never walks into or stops on one.
  (dir) =>
    Effect.promise(async () => {
      await unmountUnder(dir)
      await Fs.rm(dir, { recursive: true, force: true })
    })
)

/** Where a service on `dataDir` puts its fresh profiles (`BROWSER_PROFILES_IN_MEMORY` unset). */
export const profilesDirOf = (dataDir: string) => {
  const placed = profilesPlace(dataDir, undefined)
  if (typeof placed === "string") throw new Error(placed)
  return placed.profilesDir
}

/** Alive and not a zombie waiting for its parent (or init) to reap it. */
/** The scrypt cost the tests' services hash passwords with (`PASSWORD_SCRYPT_N`). */
export const TEST_SCRYPT_N = 1024

export const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
  } catch {
    return false
  }
}

export interface TestServiceInfo {
  readonly baseUrl: string
  readonly wsBase: string
  readonly config: ServiceConfigInput & { readonly dataDir: string; readonly databaseUrl: string }
}

export class TestService extends Context.Service<TestService, TestServiceInfo>()("test/TestService") {}

/** Options a test file may change; the rest is a fresh database, data dir and port. */
/** `port`: a fixed one, for a client registered with its callback URL in advance (OIDC); default any free port. */
export type TestServiceOptions = Omit<ServiceConfigInput, "dataDir" | "databaseUrl">

/** The whole service, over HTTP on a free loopback port, as a shared test layer (with the kinds of session `core` adds). */
export const layer = (options: TestServiceOptions = {}, core?: App.CoreOptions) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const databaseUrl = yield* freshDatabase
      const dataDir = yield* freshDataDir
      const port = options.port ?? (yield* freePort)
      const config = {
        host: "127.0.0.1",
        port,
        dataDir,
        databaseUrl,
        // No browser launched ahead unless a file asks: most files' sessions do not need one waiting,
        // and the one left warm at a file's end was a launch for nothing (5% of the suite's CPU).
        browserPoolSize: 0,
        reaperIntervalMs: 250,
        logLevel: "Error" as const,
        // Test pages are served on loopback, which the egress proxy refuses unless allowed.
        egressAllowCidrs: "127.0.0.1/32",
        // New accounts start with a balance, as a self-hoster would grant one.
        signupCreditUsd: 5,
        // Real scrypt at its lowest cost: at OWASP's (2^17) a sign-up is 0.3 core-seconds, a fifth of
        // the suite's CPU. Auth.test checks a hash at OWASP's cost still logs in.
        passwordScryptN: TEST_SCRYPT_N,
        ...options,
        // Every test signs its users up from loopback: one address, many users a minute. The files
        // that test the sign-up limits set their own.
        limits: { registrationsPerIp: 100_000, registrationsPerMinute: 100_000, ...options.limits },
        // The image the set-up built; no warm sandbox unless a file asks for one.
        sandbox: { imagesDir: IMAGES_DIR, poolSize: 0, ...options.sandbox }
      }
      const info: TestServiceInfo = {
        baseUrl: `http://${config.host}:${port}`,
        wsBase: `ws://${config.host}:${port}`,
        config
      }
      return Layer.succeed(TestService, info).pipe(Layer.merge(App.layer(config, core)))
    })
  )
