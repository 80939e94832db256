import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as FsSync from "node:fs"
import * as Path from "node:path"
import puppeteer from "puppeteer-core"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as DataDir from "../../../src/platform/files/DataDir.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import { until } from "../../support/Poll.ts"
import { startService } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"
import * as TrafficServer from "../../support/TrafficServer.ts"

// Tenant data at rest is the service's alone, whatever the umask: a service started with umask 0
// records a session, keeps its download, a job's result and a workspace's snapshot, and no other
// user of the host (nobody; the postgres user its embedded Postgres runs as) reads any of it.

/** Every path under `root` (dirs and files, no links), `root` included. */
const walk = (root: string): Array<string> => {
  const found = [root]
  for (const entry of FsSync.readdirSync(root, { withFileTypes: true })) {
    const path = Path.join(root, entry.name)
    if (entry.isDirectory()) found.push(...walk(path))
    else if (entry.isFile()) found.push(path)
  }
  return found
}

/** The paths of `paths` that `uid` can open (a file) or list (a dir). */
const readableBy = (uid: number, gid: number, paths: ReadonlyArray<string>): Array<string> => {
  const script = `
    const fs = require("fs")
    const paths = JSON.parse(fs.readFileSync(0, "utf8"))
    const open = paths.filter((path) => {
      try {
        if (fs.statSync(path).isDirectory()) fs.readdirSync(path)
        else fs.closeSync(fs.openSync(path, "r"))
        return true
      } catch {
        return false
      }
    })
    process.stdout.write(JSON.stringify(open))`
  const result = spawnSync(process.execPath, ["-e", script], {
    uid,
    gid,
    input: JSON.stringify(paths),
    encoding: "utf8"
  })
  assert.strictEqual(result.status, 0, result.stderr)
  return JSON.parse(result.stdout)
}

const idOf = (name: string) => {
  const result = spawnSync("id", ["-u", name], { encoding: "utf8" })
  const gid = spawnSync("id", ["-g", name], { encoding: "utf8" })
  return result.status === 0 ? { uid: Number(result.stdout), gid: Number(gid.stdout) } : undefined
}

describe("the data dir", () => {
  it.live(
    "a private dir is made 0700 with the dirs between it and where it is asked under; above, as the umask has them",
    () =>
      Effect.gen(function* () {
        const root = yield* TestService.freshDataDir
        const umask = process.umask()
        // A data dir whose parent is missing: the parent may be passed by another user.
        const data = Path.join(root, "above", "data")
        yield* Effect.promise(() => DataDir.makePrivate(data))
        assert.strictEqual(FsSync.statSync(data).mode & 0o777, 0o700)
        assert.strictEqual(FsSync.statSync(Path.join(root, "above")).mode & 0o777, 0o777 & ~umask)
        // A dir deep in it: every dir made between the two is private.
        const deep = Path.join(data, "tmp", "jobs", "job-1")
        yield* Effect.promise(() => DataDir.makePrivate(deep, data))
        for (const dir of ["tmp", "tmp/jobs", "tmp/jobs/job-1"])
          assert.strictEqual(FsSync.statSync(Path.join(data, dir)).mode & 0o777, 0o700, dir)
        // Made again: kept as it is.
        FsSync.chmodSync(data, 0o710)
        yield* Effect.promise(() => DataDir.makePrivate(data))
        assert.strictEqual(FsSync.statSync(data).mode & 0o777, 0o710)
      }).pipe(Effect.scoped)
  )
  it.live(
    "whatever the umask, no other user of the host reads a recording, a download, a job's result, a snapshot or the secrets",
    () =>
      Effect.gen(function* () {
        // Other users of the host exist to check against only where the tests run as root.
        if (process.getuid?.() !== 0) return
        const dataDir = yield* TestService.freshDataDir
        // A blob store of the operator's making, outside the data dir, open to all as made.
        const blobs = Path.join(yield* TestService.freshDataDir, "store")
        FsSync.mkdirSync(blobs, { mode: 0o755 })
        const env = {
          DATA_DIR: dataDir,
          BLOB_STORE: blobs,
          PORT: String(yield* TestService.freePort),
          BROWSER_POOL_SIZE: "0",
          SIGNUP_CREDIT_USD: "5",
          // Test pages are served on loopback.
          EGRESS_ALLOW_CIDRS: "127.0.0.1/32"
        }
        // An embedded Postgres (as root, run as the postgres user), and a umask that opens everything.
        const { baseUrl } = yield* startService(env, [
          "--import",
          "data:text/javascript,process.umask(0)",
          "src/main/main.ts"
        ])
        const account = yield* signUp(baseUrl)
        const key = account.key
        const page = yield* LocalPage.serve
        const traffic = yield* TrafficServer.serve("127.0.0.1")

        // A recorded session on a workspace, with a download.
        assert.strictEqual(
          (yield* request(baseUrl, "POST", "/v1/workspaces", { key, body: { name: "w" } })).status,
          200
        )
        const created = yield* request(baseUrl, "POST", "/v1/sessions", {
          key,
          body: { recording: true, workspace: "w" }
        })
        assert.strictEqual(created.status, 201, created.text)
        const session = yield* waitForSession(baseUrl, key, created.json.id, isReady)
        const browser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: session.cdp_url,
            headers: { Authorization: `Bearer ${key}` },
            defaultViewport: null
          })
        )
        const [tab] = yield* Effect.promise(() => browser.pages())
        yield* Effect.promise(() => tab!.goto(`${page}counter`))
        yield* Effect.promise(() => tab!.evaluate(() => localStorage.setItem("note", "kept")))
        yield* Effect.promise(() =>
          tab!.evaluate((url) => {
            const document = (globalThis as any).document
            const link = Object.assign(document.createElement("a"), { href: url, download: "" })
            document.body.append(link)
            link.click()
          }, `${traffic.http}/bytes?n=2048`)
        )
        yield* until(
          request(baseUrl, "GET", `/v1/sessions/${session.id}/downloads`, { key }),
          (listed) => (listed.json?.data ?? []).length === 1
        )
        yield* Effect.promise(() => tab!.click("#button"))
        yield* Effect.promise(() => browser.disconnect())
        assert.strictEqual(
          (yield* request(baseUrl, "DELETE", `/v1/sessions/${session.id}`, { key })).status,
          204
        )
        const recorded = yield* waitForSession(
          baseUrl,
          key,
          session.id,
          (s) => s.recording?.status === "ready" || s.recording?.status === "failed",
          60_000
        )
        assert.strictEqual(recorded.recording.status, "ready", JSON.stringify(recorded.recording))
        const snapshot = yield* request(baseUrl, "POST", "/v1/workspaces/w/snapshots", {
          key,
          body: { name: "s" }
        })
        assert.strictEqual(snapshot.status, 200, snapshot.text)

        // A job's result.
        const job = yield* request(baseUrl, "POST", "/v1/jobs", {
          key,
          body: { kind: "screenshot", input: { url: `${page}?title=shot` } }
        })
        assert.strictEqual(job.status, 201, job.text)
        const done = yield* until(
          request(baseUrl, "GET", `/v1/jobs/${job.json.id}`, { key }),
          (answer) => ["succeeded", "failed"].includes(answer.json?.state),
          60_000
        )
        assert.strictEqual(done.json.state, "succeeded", done.text)

        // Modes: the data dir the service's (the postgres user's group let through), secrets and blobs private.
        const postgres = idOf("postgres")!
        const dataStat = FsSync.statSync(dataDir)
        assert.strictEqual(dataStat.mode & 0o777, 0o710)
        assert.strictEqual(dataStat.gid, postgres.gid)
        assert.strictEqual(FsSync.statSync(Path.join(dataDir, "secrets.json")).mode & 0o777, 0o600)
        assert.strictEqual(FsSync.statSync(blobs).mode & 0o777, 0o700)
        const stored = walk(blobs).filter((path) => FsSync.statSync(path).isFile())
        assert.isAtLeast(stored.length, 3, `a recording, a snapshot and a job's result: ${stored}`)
        for (const file of stored) assert.strictEqual(FsSync.statSync(file).mode & 0o777, 0o600, file)
        for (const entry of FsSync.readdirSync(dataDir, { withFileTypes: true })) {
          if (entry.isSymbolicLink() || entry.isSocket()) continue
          const mode = FsSync.statSync(Path.join(dataDir, entry.name)).mode & 0o777
          if (entry.name === "postgres") assert.strictEqual(mode, 0o710, entry.name)
          else assert.strictEqual(mode & 0o077, 0, `${entry.name} is ${mode.toString(8)}`)
        }

        // What other users read of it: nothing at all; the postgres user, its own dir alone.
        const everything = [...walk(dataDir), ...walk(blobs)]
        assert.isAtLeast(everything.length, 20)
        assert.deepStrictEqual(readableBy(65534, 65534, everything), [])
        const ownDir = Path.join(dataDir, "postgres")
        assert.deepStrictEqual(
          readableBy(postgres.uid, postgres.gid, everything).filter((path) => !path.startsWith(`${ownDir}/`)),
          [],
          "the postgres user reads nothing but its own"
        )
      }).pipe(Effect.scoped),
    180_000
  )
})
