// `npm run bench:container`: the service's image, measured beside the same service on the host,
// in one run. Podman for Docker, as the container tests run it (test/support/Podman.ts): the image
// built (cached; `BENCH_COLD=1` also builds it with no cache), its size, a container's start to
// `/readyz` and its `stop` to exit, and a browser session's lifecycle (create, connect, a page,
// disconnect, delete) back to back in the container and on the host. Run as root with Podman
// installed (`npm test` installs it); writes bench/container/last-run.json.
import { spawn, spawnSync } from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import puppeteer from "puppeteer-core"

const IMAGE = "localhost/rbs-bench:latest"
// Under the creates a minute an account may make (20), the warm-up included.
const RUNS = Number(process.env.BENCH_RUNS ?? 15)
const hard = (flag: string) => spawnSync("sh", ["-c", `ulimit -H${flag}`], { encoding: "utf8" }).stdout.trim()
const conf = Path.join(Os.tmpdir(), `rbs-bench-containers-${process.pid}.conf`)
Fs.writeFileSync(
  conf,
  `[containers]\ndefault_ulimits = ["nofile=${hard("n")}:${hard("n")}", "nproc=8192:8192"]\n`
)
const env = { ...process.env, CONTAINERS_CONF: conf }

const sh = (command: string, args: ReadonlyArray<string>, extra: Record<string, string> = {}) => {
  const started = Date.now()
  const ran = spawnSync(command, args, { env: { ...env, ...extra }, encoding: "utf8", maxBuffer: 1 << 26 })
  if (ran.status !== 0) throw new Error(`${command} ${args.join(" ")}: ${ran.stdout}${ran.stderr}`)
  return { out: ran.stdout.trim(), seconds: (Date.now() - started) / 1000 }
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })

const readyIn = async (base: string) => {
  const started = Date.now()
  while (Date.now() - started < 120_000) {
    const ok = await fetch(`${base}/readyz`).then(
      (r) => r.status === 200,
      () => false
    )
    if (ok) return (Date.now() - started) / 1000
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`${base} never ready`)
}

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

/** An account with a key and a balance on the service at `base`; `credit` runs the operator's command. */
const account = async (base: string, credit: (email: string) => void) => {
  const email = `bench-${Crypto.randomBytes(4).toString("hex")}@example.com`
  const json = { "content-type": "application/json" }
  const body = JSON.stringify({ email, password: "a long password" })
  await fetch(`${base}/auth/register`, { method: "POST", headers: json, body })
  credit(email)
  const login = await fetch(`${base}/auth/login`, { method: "POST", headers: json, body })
  const cookie = login.headers.get("set-cookie")!.split(";")[0]!
  const key = await fetch(`${base}/v1/keys`, {
    method: "POST",
    headers: { ...json, cookie },
    body: JSON.stringify({ name: "bench" })
  }).then((r) => r.json() as Promise<{ secret: string }>)
  return key.secret
}

/** One lifecycle, in ms: create, connect, a page, disconnect, delete. */
const lifecycle = async (base: string, key: string) => {
  const started = performance.now()
  const auth = { authorization: `Bearer ${key}` }
  const created = (await fetch(`${base}/v1/sessions`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: "{}"
  }).then((r) => r.json())) as { id: string; cdp_url: string }
  if (created.cdp_url === undefined) throw new Error(`create on ${base}: ${JSON.stringify(created)}`)
  const browser = await puppeteer.connect({
    browserWSEndpoint: created.cdp_url,
    headers: { Authorization: `Bearer ${key}` }
  })
  const [page] = await browser.pages()
  await page!.goto("data:text/html,<h1>bench</h1>")
  await browser.disconnect()
  await fetch(`${base}/v1/sessions/${created.id}`, { method: "DELETE", headers: auth })
  return performance.now() - started
}

const lifecycles = async (base: string, key: string) => {
  await lifecycle(base, key) // warm-up
  const samples: Array<number> = []
  for (let i = 0; i < RUNS; i++) {
    samples.push(await lifecycle(base, key))
    // The warm pool refills between sessions, as for any client that is not in a hurry.
    await new Promise((resolve) => setTimeout(resolve, 1_000))
  }
  return { p50: quantile(samples, 0.5), p95: quantile(samples, 0.95), samples }
}

/** `podman build` with no registry, and a TLS-intercepting proxy's CA as a secret where one is set. */
const build = (...extra: ReadonlyArray<string>) => {
  const ca = process.env.NODE_EXTRA_CA_CERTS
  const secret = ca !== undefined && Fs.existsSync(ca) ? ["--secret", `id=ca,src=${ca}`] : []
  return sh("podman", ["build", "--pull=never", "--format", "docker", ...secret, ...extra, "-t", IMAGE, "."])
    .seconds
}

const main = async () => {
  const cold = process.env.BENCH_COLD === "1" ? build("--no-cache") : undefined
  const cached = build()
  const size = Number(sh("podman", ["image", "inspect", "--format", "{{.Size}}", IMAGE]).out)

  // The container: start to /readyz, lifecycles, stop to exit.
  const name = `rbs-bench-${process.pid}`
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const runStarted = Date.now()
  sh("podman", [
    "run",
    "-d",
    "--name",
    name,
    "--security-opt",
    "systempaths=unconfined",
    "-p",
    `127.0.0.1:${port}:8080`,
    "-e",
    `PUBLIC_URL=${base}`,
    IMAGE
  ])
  const containerReady = (Date.now() - runStarted) / 1000 + (await readyIn(base))
  let inContainer
  let stop
  try {
    const key = await account(base, (email) =>
      sh("podman", [
        "exec",
        name,
        "rbs",
        "billing",
        "credit",
        "--account",
        email,
        "--usd",
        "10",
        "--reason",
        "bench"
      ])
    )
    inContainer = await lifecycles(base, key)
    stop = sh("podman", ["stop", "-t", "30", name]).seconds
  } finally {
    spawnSync("podman", ["rm", "-f", "-v", "-t", "0", name], { env })
  }

  // The host: the same service from this checkout, its own data dir and embedded Postgres.
  const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "rbs-bench-host-"))
  const hostPort = await freePort()
  const hostBase = `http://127.0.0.1:${hostPort}`
  const hostEnv = { ...env, DATA_DIR: dataDir, PORT: String(hostPort), LOG_LEVEL: "warn" }
  const host = spawn("node_modules/.bin/node", ["--experimental-strip-types", "src/main/main.ts"], {
    env: hostEnv,
    stdio: "ignore"
  })
  let onHost
  let hostReady
  try {
    hostReady = await readyIn(hostBase)
    const key = await account(hostBase, (email) =>
      sh(
        "node_modules/.bin/node",
        ["bin/rbs.mjs", "billing", "credit", "--account", email, "--usd", "10", "--reason", "bench"],
        hostEnv
      )
    )
    onHost = await lifecycles(hostBase, key)
  } finally {
    host.kill("SIGTERM")
    await new Promise((resolve) => host.once("exit", resolve))
    Fs.rmSync(dataDir, { recursive: true, force: true })
    Fs.rmSync(conf, { force: true })
  }

  const result = {
    at: new Date().toISOString(),
    image: { bytes: size, cachedBuildSeconds: cached, coldBuildSeconds: cold },
    container: { readySeconds: containerReady, stopSeconds: stop, lifecycleMs: inContainer },
    host: { readySeconds: hostReady, lifecycleMs: onHost }
  }
  Fs.writeFileSync(Path.join(import.meta.dirname, "last-run.json"), JSON.stringify(result, null, 2) + "\n")
  const ms = (figures: { p50: number; p95: number }) =>
    `p50 ${figures.p50.toFixed(1)} ms, p95 ${figures.p95.toFixed(1)} ms`
  console.log(
    `image: ${(size / 1e9).toFixed(2)} GB; build cached ${cached.toFixed(1)} s${cold === undefined ? "" : `, cold ${cold.toFixed(1)} s`}`
  )
  console.log(
    `container: start to /readyz ${containerReady.toFixed(2)} s, stop to exit ${stop!.toFixed(2)} s`
  )
  console.log(`host: start to /readyz ${hostReady!.toFixed(2)} s`)
  console.log(
    `a session's lifecycle (${RUNS}, back to back): container ${ms(inContainer!)}; host ${ms(onHost!)}; ratio ${(inContainer!.p50 / onHost!.p50).toFixed(2)}x`
  )
}

await main()
