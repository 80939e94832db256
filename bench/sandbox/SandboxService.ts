import { Effect, Exit, Layer, References, Scope } from "effect"
import { execFileSync } from "node:child_process"
import * as Crypto from "node:crypto"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as App from "../../src/main/App.ts"
import { call, freePort, json } from "../session-lifecycle/TargetService.ts"

/** The image store the set-up built (`npm start` / `npm test`), as test/support/Images.ts names it. */
export const SETUP_IMAGES_DIR = Path.resolve(".data", "images")

/** A second name for the default image, in the bench's own store: a create naming it is a cold launch. */
export const COLD_IMAGE = "bench-cold"

/** The service under measurement, started here or already running at `BENCH_URL`. */
export interface SandboxService {
  readonly baseUrl: string
  readonly kind: "in-process" | "external"
  /** The image whose creates launch a sandbox for the request alone; none known against `BENCH_URL` unless named. */
  readonly coldImage: string | undefined
  /** runc's state dir of the service's sandboxes (started here only). */
  readonly runcRoot: string | undefined
  /** What of its sandboxes is on the machine: runc's containers, mounts below its data dir (started here only). */
  readonly leftovers: (() => Leftovers) | undefined
  /** Idempotent: safe from both the normal path and a signal handler. */
  readonly stop: () => Promise<void>
}

const once = (f: () => Promise<void>) => {
  let running: Promise<void> | undefined
  return () => (running ??= f())
}

/** Where a service of `dataDir` keeps runc's state, as src/runtimes/sandbox/SandboxHost.ts derives it. */
export const runcRootOf = (dataDir: string) =>
  `/run/rbs-sbx-${Crypto.createHash("sha256").update(Path.resolve(dataDir)).digest("hex").slice(0, 8)}/runc`

/**
 * `runc --root <root> list`: the containers still there. None when the root
 * is gone (the service removes it when it stops), and then runc is not run:
 * it would make the root again.
 */
export const runcContainers = (root: string): ReadonlyArray<string> =>
  FsSync.existsSync(root)
    ? execFileSync("runc", ["--root", root, "list", "--quiet"], { encoding: "utf8" })
        .split("\n")
        .filter((line) => line !== "")
    : []

export interface Leftovers {
  readonly containers: ReadonlyArray<string>
  readonly mounts: ReadonlyArray<string>
  /** Whether runc's state dir is still there. */
  readonly runcRoot: boolean
}

const mountsUnder = (dir: string) =>
  FsSync.readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((line) => line.split(" ")[4] ?? "")
    .filter((point) => point.startsWith(`${dir}/`))

/**
 * An image store of the bench's own that holds the set-up's `debian` twice:
 * as `debian` (the default, which the warm pool keeps) and as `bench-cold`.
 * The pool launches only the default image ahead of demand; a create naming
 * another image gets a sandbox launched for it alone (`WarmPool.acquireCold`).
 * Both names point at the same manifest and the same unpacked tree, so a
 * cold create does exactly a pool launch's work, inline. The blobs and the
 * unpacked images are links to the set-up's store, never written.
 */
const aliasStore = async (dir: string) => {
  const oci = Path.join(SETUP_IMAGES_DIR, "oci")
  const index: { readonly manifests: ReadonlyArray<{ readonly annotations?: Record<string, string> }> } =
    JSON.parse(await Fs.readFile(Path.join(oci, "index.json"), "utf8"))
  const refName = "org.opencontainers.image.ref.name"
  const debian = index.manifests.find((entry) => entry.annotations?.[refName] === "debian")
  if (debian === undefined)
    throw new Error(`no "debian" image in ${SETUP_IMAGES_DIR}: run the set-up (npm test or npm start) once`)
  const alias = { ...debian, annotations: { ...debian.annotations, [refName]: COLD_IMAGE } }
  await Fs.mkdir(Path.join(dir, "oci"), { recursive: true })
  await Fs.copyFile(Path.join(oci, "oci-layout"), Path.join(dir, "oci", "oci-layout"))
  await Fs.writeFile(
    Path.join(dir, "oci", "index.json"),
    JSON.stringify({ ...index, manifests: [debian, alias] })
  )
  await Fs.symlink(Path.join(oci, "blobs"), Path.join(dir, "oci", "blobs"))
  await Fs.symlink(Path.join(SETUP_IMAGES_DIR, "unpacked"), Path.join(dir, "unpacked"))
}

/**
 * Builds `App.layer` into a scope of our own, as bench/session-lifecycle
 * does (temp data dir, so the embedded Postgres starts from an empty
 * cluster), with no browser pool and `poolSize` warm sandboxes. Closing the
 * scope deletes every sandbox and stops Postgres; the data dir goes after,
 * unless something is still mounted below it (then it is left, and said).
 */
export const startInProcess = async (
  poolSize: number,
  diskMb: number,
  log: (message: string) => void
): Promise<SandboxService> => {
  const dataDir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-bench-sandbox-"))
  // As root the embedded Postgres runs as the `postgres` user, which must be able to enter the dir.
  await Fs.chmod(dataDir, 0o755)
  const imagesDir = Path.join(dataDir, "images")
  await aliasStore(imagesDir)
  const runcRoot = runcRootOf(dataDir)
  const port = await freePort()
  const scope = Effect.runSync(Scope.make())
  const stop = once(async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    const mounted = mountsUnder(dataDir)
    // `rm -r` through a sandbox's image mount would reach the set-up's image.
    if (mounted.length > 0) return log(`left ${dataDir}: still mounted below it: ${mounted.join(", ")}`)
    await Fs.rm(dataDir, { recursive: true, force: true, maxRetries: 3 })
  })
  const layer = App.layer({
    host: "127.0.0.1",
    port,
    dataDir,
    browserPoolSize: 0,
    logLevel: "Warn",
    signupCreditUsd: 1000,
    // The bench measures speed, not the per-account and per-principal budgets.
    limits: {
      sessionCreatesPerMinute: 1_000_000,
      concurrentSessions: 1_000,
      execPerMinute: 1_000_000,
      fileTransfersPerMinute: 1_000_000
    },
    sandbox: { imagesDir, poolSize, diskMb }
  }).pipe(Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn")))
  try {
    await Effect.runPromise(Layer.buildWithScope(layer, scope))
  } catch (error) {
    await stop()
    throw error
  }
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    kind: "in-process",
    coldImage: COLD_IMAGE,
    runcRoot,
    leftovers: () => ({
      containers: runcContainers(runcRoot),
      mounts: mountsUnder(dataDir),
      runcRoot: FsSync.existsSync(runcRoot)
    }),
    stop
  }
}

export const external = (url: string, coldImage: string | undefined): SandboxService => ({
  baseUrl: url.replace(/\/+$/, ""),
  kind: "external",
  coldImage,
  runcRoot: undefined,
  leftovers: undefined,
  stop: async () => {}
})

export interface PoolState {
  readonly idle: number
  readonly target: number
  readonly capacity: number
}

/** `GET /readyz`'s `sandbox_pool`, `undefined` while not ready (503) or unreachable. */
export const sandboxPool = async (baseUrl: string): Promise<PoolState | undefined> => {
  const response = await call(baseUrl, "GET", "/readyz").catch(() => undefined)
  if (response?.status !== 200) return undefined
  return json(response.bytes).sandbox_pool
}

/** Waits until `/readyz` answers 200 and, with `fullPool`, until the warm sandboxes reach the pool's target. */
export const waitForPool = async (baseUrl: string, fullPool: boolean, timeoutMs = 120_000) => {
  const deadline = performance.now() + timeoutMs
  while (performance.now() < deadline) {
    const pool = await sandboxPool(baseUrl)
    if (pool !== undefined && (!fullPool || pool.idle >= pool.target)) return pool
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`${baseUrl} not ready${fullPool ? " with a full sandbox pool" : ""} after ${timeoutMs} ms`)
}

/** Warm and cold sandbox acquires the service has counted (`/metrics`). */
export const sandboxAcquires = async (baseUrl: string): Promise<{ warm: number; cold: number }> => {
  const response = await call(baseUrl, "GET", "/metrics")
  const text = new TextDecoder().decode(response.bytes)
  const read = (result: string) =>
    Number(new RegExp(`rbs_sandbox_pool_acquires_total\\{result="${result}"\\} (\\d+)`).exec(text)?.[1] ?? 0)
  return { warm: read("warm"), cold: read("cold") }
}
