import { Effect, Exit, Layer, References, Scope } from "effect"
import { spawn } from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as App from "../../src/main/App.ts"

/** The service under measurement: started here, or one already running at `BENCH_URL`. */
export interface TargetService {
  readonly baseUrl: string
  readonly kind: "in-process" | "child-process" | "external"
  /** Whose RSS to report: this process in-process, `BENCH_SERVICE_PID` for an external one. */
  readonly pid: number | undefined
  /** Started here: the service's data dir (its browsers' profiles are under it). */
  readonly dataDir?: string
  /** Idempotent: safe to call from both the normal path and a signal handler. */
  readonly stop: () => Promise<void>
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })

const once = (f: () => Promise<void>) => {
  let running: Promise<void> | undefined
  return () => (running ??= f())
}

/** Browser places of the in-process service: above what the density ramp reaches on any test machine. */
export const DENSITY_CAPACITY = 400

/**
 * Builds `App.layer` into a scope of our own. Closing that scope stops the
 * pool's Chromiums and the embedded Postgres; the temp data dir goes after.
 */
export const startInProcess = async (
  poolSize: number,
  chromePath: string | undefined,
  /** Where the service exports its spans (OTLP over HTTP), if anywhere. */
  otelEndpoint?: string
): Promise<TargetService> => {
  const dataDir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-bench-"))
  // As root the embedded Postgres runs as the `postgres` user, which must be able to enter the dir.
  await Fs.chmod(dataDir, 0o755)
  const port = await freePort()
  const scope = Effect.runSync(Scope.make())
  const stop = once(async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await Fs.rm(dataDir, { recursive: true, force: true, maxRetries: 3 })
  })
  const layer = App.layer({
    host: "127.0.0.1",
    port,
    dataDir,
    browserPoolSize: poolSize,
    chromePath,
    logLevel: "Warn",
    // The bench's page is served on loopback, which the egress proxy refuses unless allowed.
    egressAllowCidrs: "127.0.0.1/32",
    signupCreditUsd: 1000,
    // The density ramp finds what the machine holds, not what the defaults allow (10 a 2-core node).
    maxBrowsers: DENSITY_CAPACITY,
    maxContexts: DENSITY_CAPACITY * 4,
    // The bench measures speed, not the per-account limits: one account makes all its sessions.
    limits: { sessionCreatesPerMinute: 1_000_000, concurrentSessions: 1_000 },
    ...(otelEndpoint === undefined ? {} : { otelEndpoint })
  }).pipe(Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn")))
  try {
    await Effect.runPromise(Layer.buildWithScope(layer, scope))
  } catch (error) {
    await stop()
    throw error
  }
  return { baseUrl: `http://127.0.0.1:${port}`, kind: "in-process", pid: process.pid, dataDir, stop }
}

/**
 * `node src/main/main.ts` as `npm start` runs it, in a process of its own, so the
 * bench's client and the service do not share one event loop. SIGTERM stops
 * it (and its Chromiums and Postgres); the temp data dir goes after.
 */
export const startChildProcess = async (
  env: Record<string, string>,
  chromePath: string | undefined
): Promise<TargetService> => {
  const dataDir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-bench-"))
  await Fs.chmod(dataDir, 0o755)
  const port = await freePort()
  const child = spawn(
    process.execPath,
    [
      ...(process.env.BENCH_NODE_ARGS?.split(" ").filter(Boolean) ?? []),
      "--experimental-strip-types",
      "src/main/main.ts"
    ],
    {
      env: {
        ...process.env,
        PORT: String(port),
        HOST: "127.0.0.1",
        DATA_DIR: dataDir,
        LOG_LEVEL: "warn",
        EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
        SIGNUP_CREDIT_USD: "1000",
        ...(chromePath === undefined ? {} : { CHROME_PATH: chromePath }),
        ...env
      },
      stdio: ["ignore", "ignore", "inherit"]
    }
  )
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const stop = once(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
    await exited
    await Fs.rm(dataDir, { recursive: true, force: true, maxRetries: 3 })
  })
  const baseUrl = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 120_000
  while (
    !(await fetch(`${baseUrl}/readyz`).then(
      (r) => r.ok,
      () => false
    ))
  ) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop()
      throw new Error("the service did not become ready")
    }
    await sleep(100)
  }
  return { baseUrl, kind: "child-process", pid: child.pid, dataDir, stop }
}

export const external = (url: string): TargetService => {
  const pid = Number(process.env.BENCH_SERVICE_PID)
  return {
    baseUrl: url.replace(/\/+$/, ""),
    kind: "external",
    pid: Number.isInteger(pid) && pid > 0 ? pid : undefined,
    stop: async () => {}
  }
}

export interface CallOptions {
  readonly key?: string
  readonly cookie?: string
  readonly body?: unknown
}

/** One HTTP call, with the body read in full (so its time counts in the round trip). */
export const call = async (baseUrl: string, method: string, path: string, options: CallOptions = {}) => {
  const headers: Record<string, string> = {}
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`
  if (options.cookie !== undefined) headers.cookie = options.cookie
  if (options.body !== undefined) headers["content-type"] = "application/json"
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers,
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
  })
  const bytes = new Uint8Array(await response.arrayBuffer())
  return { status: response.status, headers: response.headers, bytes }
}

export const json = (bytes: Uint8Array): any => JSON.parse(new TextDecoder().decode(bytes))

/** A whole number from the environment, `fallback` when unset; refuses anything below `minimum`. */
export const intFromEnv = (name: string, fallback: number, minimum = 1) => {
  const raw = process.env[name]
  if (raw === undefined || raw === "") return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < minimum)
    throw new Error(`${name} must be an integer >= ${minimum}, got ${raw}`)
  return value
}

/** 503 `capacity_exhausted` answers the benches met (each waited out as a client would). */
export const capacityRefusals = { count: 0 }

/**
 * `POST /v1/sessions` as a well-behaved client does it: on 503
 * `capacity_exhausted` (every browser place taken) it waits `Retry-After`
 * and tries again, so the wait is part of the create-to-ready time.
 */
export type SessionIsolation = "browser" | "context"

/** `BENCH_ISOLATION`: the sessions' isolation (`browser`, the default, or `context`). */
export const isolation: SessionIsolation = (() => {
  const value = process.env.BENCH_ISOLATION ?? "browser"
  if (value !== "browser" && value !== "context")
    throw new Error(`BENCH_ISOLATION must be browser or context, got ${value}`)
  return value
})()

/**
 * `BENCH_CREATE_BODY`: more fields of every create, as JSON (`{"timezone":"Asia/Tokyo"}` times
 * sessions whose identity takes a launch of their own); unset: none.
 */
export const createBody: Record<string, unknown> = JSON.parse(process.env.BENCH_CREATE_BODY || "{}")

export const createSession = async (baseUrl: string, key: string, kind: SessionIsolation = isolation) => {
  while (true) {
    const created = await call(baseUrl, "POST", "/v1/sessions", {
      key,
      body: kind === "context" ? { ...createBody, isolation: kind } : createBody
    })
    if (created.status !== 503) return created
    capacityRefusals.count++
    await sleep(1000 * Number(created.headers.get("retry-after") ?? 1))
  }
}

/**
 * Polls `GET /v1/sessions/{id}` every 5 ms until it says `ready` (the
 * lifecycle's `ready` phase ends there); another status than `creating`, or
 * `timeoutMs`, fails.
 */
export const waitForReady = async (baseUrl: string, key: string, id: string, timeoutMs = 60_000) => {
  const deadline = performance.now() + timeoutMs
  while (true) {
    const status: string = json((await call(baseUrl, "GET", `/v1/sessions/${id}`, { key })).bytes).status
    if (status === "ready") return
    if (status !== "creating") throw new Error(`session ${id} became ${status} instead of ready`)
    if (performance.now() > deadline) throw new Error(`session ${id} never became ready`)
    await sleep(5)
  }
}

const expectStatus = (what: string, status: number, expected: number, bytes: Uint8Array) => {
  if (status !== expected)
    throw new Error(`${what}: HTTP ${status} (wanted ${expected}): ${new TextDecoder().decode(bytes)}`)
}

/** `POST /v1/extensions` with the zip at `path`: the extension's id. */
export const uploadExtension = async (baseUrl: string, key: string, path: string): Promise<string> => {
  const form = new FormData()
  form.append("file", new Blob([await Fs.readFile(path)]), "extension.zip")
  const response = await fetch(`${baseUrl}/v1/extensions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
    body: form
  })
  const answer = (await response.json()) as { id?: string }
  if (response.status !== 201 || answer.id === undefined)
    throw new Error(`upload the extension: HTTP ${response.status}: ${JSON.stringify(answer)}`)
  return answer.id
}

/** Register, log in, create a key: the API key the flows use. */
export const signUp = async (baseUrl: string): Promise<string> => {
  const email = `bench-${Crypto.randomBytes(6).toString("hex")}@example.com`
  const password = "bench-password-1234"
  const registered = await call(baseUrl, "POST", "/auth/register", { body: { email, password } })
  expectStatus("register", registered.status, 201, registered.bytes)
  const login = await call(baseUrl, "POST", "/auth/login", { body: { email, password } })
  expectStatus("login", login.status, 200, login.bytes)
  const cookie = login.headers
    .getSetCookie()
    .map((header) => header.split(";")[0]!)
    .find((pair) => pair.startsWith("service_session="))
  if (cookie === undefined) throw new Error("login: no service_session cookie in set-cookie")
  const created = await call(baseUrl, "POST", "/v1/keys", {
    cookie,
    body: { name: "session-lifecycle bench" }
  })
  expectStatus("create key", created.status, 201, created.bytes)
  const key: string = json(created.bytes).secret
  await fundAccount(baseUrl, key, cookie)
  return key
}

/**
 * Sessions need a positive balance. The in-process service grants a signup
 * credit; a service at BENCH_URL may not, so top its account up through the
 * local checkout page (the provider when Stripe is not configured).
 */
const fundAccount = async (baseUrl: string, key: string, cookie: string) => {
  const summary = await call(baseUrl, "GET", "/v1/billing/summary", { key })
  expectStatus("billing summary", summary.status, 200, summary.bytes)
  if (json(summary.bytes).balance_micro_usd > 0) return
  const topup = await call(baseUrl, "POST", "/v1/billing/topup", { cookie, body: { amount_usd: 100 } })
  expectStatus("top-up", topup.status, 200, topup.bytes)
  const url = new URL(json(topup.bytes).checkout_url)
  if (url.origin !== new URL(baseUrl).origin) {
    throw new Error(
      `the service tops up through an external provider (${url.origin}): credit the bench's account with \`npx rbs billing credit\` instead`
    )
  }
  const paid = await call(baseUrl, "POST", url.pathname, { cookie })
  expectStatus("pay the local checkout", paid.status, 200, paid.bytes)
}

export interface PoolState {
  readonly idle: number
  readonly target: number
}

/** `GET /readyz`: the pool's state when ready, `undefined` while not (503) or unreachable. */
export const readyz = async (baseUrl: string): Promise<PoolState | undefined> => {
  const response = await call(baseUrl, "GET", "/readyz").catch(() => undefined)
  if (response?.status !== 200) return undefined
  return json(response.bytes).browser_pool
}

/** Waits until `/readyz` answers 200 and, with `fullPool`, until every pool slot holds a browser. */
export const waitForService = async (baseUrl: string, fullPool: boolean, timeoutMs = 120_000) => {
  const deadline = performance.now() + timeoutMs
  while (performance.now() < deadline) {
    const pool = await readyz(baseUrl)
    if (pool !== undefined && (!fullPool || pool.idle >= pool.target)) return pool
    await sleep(50)
  }
  throw new Error(`${baseUrl} not ready${fullPool ? " with a full pool" : ""} after ${timeoutMs} ms`)
}

/** Resident set size in bytes (Linux `/proc`), `undefined` when unknown. */
export const rssBytes = async (pid: number | undefined): Promise<number | undefined> => {
  if (pid === undefined) return undefined
  const status = await Fs.readFile(`/proc/${pid}/status`, "utf8").catch(() => "")
  const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1]
  return kb === undefined ? undefined : Number(kb) * 1024
}
