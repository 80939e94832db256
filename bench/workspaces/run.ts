// Workspaces: snapshot and restore throughput of a 500 MB workspace beside plain `tar | zstd` of the
// same directory, clone time of a 1 GB one beside `cp -a`, session create-to-ready on a workspace
// beside a warm one, and screenshot jobs a minute on one node, all in the same run. See bench/README.md.
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as WorkspaceDisk from "../../src/features/workspaces/WorkspaceDisk.ts"
import { stats } from "../session-lifecycle/Report.ts"
import { call, intFromEnv, json, sleep, startInProcess } from "../session-lifecycle/TargetService.ts"

const SNAPSHOT_MB = intFromEnv("BENCH_SNAPSHOT_MB", 500)
const CLONE_MB = intFromEnv("BENCH_CLONE_MB", 1000)
const SESSIONS = intFromEnv("BENCH_SESSIONS", 10)
const JOBS = intFromEnv("BENCH_JOBS", 20)
const resultFile = new URL("./last-run.json", import.meta.url)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)
const run = <A>(effect: Effect.Effect<A, unknown>) => Effect.runPromise(effect)
const sh = (script: string) =>
  execFileSync("/bin/sh", ["-c", script], { stdio: ["ignore", "ignore", "inherit"] })
const timed = async (f: () => Promise<unknown> | unknown) => {
  const started = performance.now()
  await f()
  return performance.now() - started
}
const dropCaches = () => {
  try {
    sh("sync && echo 3 > /proc/sys/vm/drop_caches")
  } catch {
    // not root: the page cache stays warm for both sides alike
  }
}

/**
 * A workspace of `mb` MB as a project looks: half source-like text (compressible), half random
 * bytes (build outputs, images), in files of 64 KB to 4 MB over a few dirs.
 */
const fill = async (dir: string, mb: number) => {
  let written = 0
  let n = 0
  const text = Buffer.from("export const answer = (x: number) => x * 42 // a line of source\n".repeat(1024))
  while (written < mb * 1024 * 1024) {
    const size = [64, 256, 1024, 4096][n % 4]! * 1024
    const sub = Path.join(dir, `pkg-${n % 16}`)
    await Fs.mkdir(sub, { recursive: true })
    const bytes =
      n % 2 === 0
        ? Buffer.concat(Array.from({ length: Math.ceil(size / text.length) }, () => text)).subarray(0, size)
        : Crypto.randomBytes(size)
    await Fs.writeFile(Path.join(sub, `file-${n}.bin`), bytes)
    written += size
    n++
  }
  return { files: n, bytes: written }
}

/** As the service makes them: each workspace a file system of its own (as root, `WORKSPACE_DISK_MB`, 0 for none). */
const DISK_MB = intFromEnv("WORKSPACE_DISK_MB", 5120, 0)
const imaged = DISK_MB > 0 && process.getuid?.() === 0

const diskBench = async (root: string) => {
  const disk = WorkspaceDisk.make(
    Path.join(root, "workspaces"),
    imaged ? { dir: Path.join(root, "workspace-disks"), bytes: DISK_MB * 1024 * 1024 } : undefined
  )
  try {
    return await diskRounds(root, disk)
  } finally {
    await run(disk.detachAll)
  }
}

const diskRounds = async (root: string, disk: WorkspaceDisk.WorkspaceDisk) => {
  const dir = await run(disk.ensure("snap"))
  log(`filling a ${SNAPSHOT_MB} MB workspace`)
  const filled = await fill(dir, SNAPSHOT_MB)
  const archive = Path.join(root, "service.tar.zst")
  const plain = Path.join(root, "plain.tar.zst")
  const rounds = intFromEnv("BENCH_ROUNDS", 3)
  const snap = { service: [] as Array<number>, plain: [] as Array<number> }
  const restore = { service: [] as Array<number>, plain: [] as Array<number> }
  for (let round = 0; round < rounds; round++) {
    // The content's generation now (a restore below switches it).
    const source = await run(disk.current("snap"))
    dropCaches()
    snap.plain.push(
      await timed(() => sh(`tar -C '${source}' -cf - . | ${WorkspaceDisk.ZSTD} -o '${plain}' -f`))
    )
    dropCaches()
    await Fs.rm(archive, { force: true })
    snap.service.push(await timed(() => run(disk.archive("snap", archive))))
    const target = Path.join(root, "plain-restore")
    await Fs.rm(target, { recursive: true, force: true })
    await Fs.mkdir(target)
    dropCaches()
    restore.plain.push(await timed(() => sh(`zstd -q -dc '${plain}' | tar -C '${target}' -xf -`)))
    dropCaches()
    restore.service.push(await timed(() => run(disk.restore("snap", archive))))
  }
  const archiveBytes = (await Fs.stat(archive)).size
  const mbps = (ms: number) => Math.round((filled.bytes / 1024 / 1024 / (ms / 1000)) * 10) / 10

  log(`filling a ${CLONE_MB} MB workspace to clone`)
  const big = await run(disk.ensure("big"))
  await fill(big, CLONE_MB)
  const clone = { service: [] as Array<number>, plain: [] as Array<number> }
  for (let round = 0; round < rounds; round++) {
    await run(disk.remove("copy"))
    clone.service.push(await timed(() => run(disk.clone("big", "copy"))))
    await Fs.rm(Path.join(root, "cp"), { recursive: true, force: true })
    clone.plain.push(await timed(() => sh(`cp -a '${big}/.' '${Path.join(root, "cp")}'`)))
  }
  const reflinks = (() => {
    try {
      sh(
        `cp --reflink=always '${Path.join(big, "pkg-0", "file-0.bin")}' '${Path.join(root, "reflink-probe")}'`
      )
      return true
    } catch {
      return false
    }
  })()
  const median = (values: ReadonlyArray<number>) => Math.round(stats(values).p50)
  return {
    snapshot: {
      mb: SNAPSHOT_MB,
      files: filled.files,
      archiveMb: Math.round(archiveBytes / 1024 / 1024),
      serviceMs: median(snap.service),
      plainMs: median(snap.plain),
      serviceMBps: mbps(median(snap.service)),
      plainMBps: mbps(median(snap.plain)),
      ratio: Math.round((median(snap.service) / median(snap.plain)) * 100) / 100
    },
    restore: {
      serviceMs: median(restore.service),
      plainMs: median(restore.plain),
      serviceMBps: mbps(median(restore.service)),
      plainMBps: mbps(median(restore.plain)),
      ratio: Math.round((median(restore.service) / median(restore.plain)) * 100) / 100
    },
    clone: { mb: CLONE_MB, reflinks, serviceMs: median(clone.service), cpMs: median(clone.plain) },
    diskMb: imaged ? DISK_MB : 0
  }
}

const serviceBench = async () => {
  const page = Http.createServer((_request, response) => {
    response.writeHead(200, { "content-type": "text/html" })
    response.end("<!doctype html><title>bench</title><h1>a page to capture</h1>")
  })
  await new Promise<void>((resolve) => page.listen(0, "127.0.0.1", resolve))
  const pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}/`
  const target = await startInProcess(2, process.env.CHROME_PATH)
  try {
    const base = target.baseUrl
    const email = `bench-${Crypto.randomBytes(6).toString("hex")}@example.com`
    await call(base, "POST", "/auth/register", { body: { email, password: "bench-password-1234" } })
    const login = await call(base, "POST", "/auth/login", {
      body: { email, password: "bench-password-1234" }
    })
    const cookie = login.headers.getSetCookie()[0]!.split(";")[0]!
    const key = json((await call(base, "POST", "/v1/keys", { cookie, body: { name: "bench" } })).bytes).secret
    await call(base, "POST", "/v1/workspaces", { key, body: { name: "bench", session_type: "browser" } })
    const readyMs = async (body: object) => {
      const started = performance.now()
      const created = json((await call(base, "POST", "/v1/sessions", { key, body })).bytes)
      while (json((await call(base, "GET", `/v1/sessions/${created.id}`, { key })).bytes).status !== "ready")
        await sleep(5)
      const ms = performance.now() - started
      await call(base, "DELETE", `/v1/sessions/${created.id}`, { key })
      return ms
    }
    const plain: Array<number> = []
    const onWorkspace: Array<number> = []
    for (let i = 0; i < SESSIONS + 1; i++) {
      // Each after the one before has given its browser back; the first of each is a warm-up.
      const a = await readyMs({})
      await sleep(500)
      const b = await readyMs({ workspace: "bench" })
      await sleep(1500)
      if (i > 0) {
        plain.push(a)
        onWorkspace.push(b)
      }
    }
    log(`${JOBS} screenshot jobs`)
    const started = performance.now()
    const ids: Array<string> = []
    for (let i = 0; i < JOBS; i++) {
      const created = await call(base, "POST", "/v1/jobs", {
        key,
        body: { kind: "screenshot", input: { url: pageUrl } }
      })
      ids.push(json(created.bytes).id)
    }
    let done = 0
    while (done < JOBS) {
      await sleep(100)
      const list = json((await call(base, "GET", `/v1/jobs?kind=screenshot&limit=100`, { key })).bytes)
      done = list.data.filter((job: any) => job.state === "succeeded" || job.state === "failed").length
    }
    const minutes = (performance.now() - started) / 60_000
    const failed = json((await call(base, "GET", `/v1/jobs?state=failed`, { key })).bytes).data.length
    const round = (s: { p50: number; p95: number }) => ({ p50: Math.round(s.p50), p95: Math.round(s.p95) })
    return {
      createToReadyMs: { warm: round(stats(plain)), workspace: round(stats(onWorkspace)) },
      screenshotJobs: { jobs: JOBS, failed, perMinute: Math.round(JOBS / minutes) }
    }
  } finally {
    await target.stop()
    page.close()
  }
}

const root = await Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-bench-ws-"))
try {
  const disk = await diskBench(root)
  log(JSON.stringify(disk))
  await Fs.rm(root, { recursive: true, force: true })
  const service = await serviceBench()
  const result = { at: new Date().toISOString(), cores: Os.availableParallelism(), ...disk, ...service }
  await Fs.writeFile(resultFile, `${JSON.stringify(result, null, 2)}\n`)
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
} finally {
  await Fs.rm(root, { recursive: true, force: true })
}
