import { assert, it as plain, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { chromium } from "playwright-core"
import puppeteer from "puppeteer-core"
import * as BrowserDownloads from "../../../src/runtimes/browser/BrowserDownloads.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

/** A site with a page linking to a file served as an attachment (`/report.csv`, its bytes fixed per server). */
const site = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ readonly url: string; readonly bytes: Buffer; readonly server: Http.Server }>(
        (resolve) => {
          const bytes = Crypto.randomBytes(200_000)
          const server = Http.createServer((request, response) => {
            if (request.url === "/report.csv") {
              response.writeHead(200, {
                "content-type": "text/csv",
                "content-disposition": 'attachment; filename="report.csv"',
                "content-length": bytes.length
              })
              return response.end(bytes)
            }
            response.writeHead(200, { "content-type": "text/html" })
            response.end(
              `<!doctype html><title>files</title><a id="get" href="/report.csv" download>report</a>`
            )
          })
          server.listen(0, "127.0.0.1", () =>
            resolve({ url: `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}`, bytes, server })
          )
        }
      )
  ),
  ({ server }) =>
    Effect.promise(
      () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
    )
)

layer(TestService.layer({ browserPoolSize: 1 }), { excludeTestServices: true })(
  "a browser session's downloads",
  (it) => {
    const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
      Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

    const session = Effect.gen(function* () {
      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const created = yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
      assert.strictEqual(created.status, 201, created.text)
      const ready = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
      return { service, key: account.key as string, id: ready.id as string, cdpUrl: ready.cdp_url as string }
    })

    /** The session's downloads list, once it names `name`. */
    const listed = (key: string, id: string, name: string) =>
      Effect.gen(function* () {
        for (let i = 0; i < 100; i++) {
          const list = yield* api("GET", `/v1/sessions/${id}/downloads`, { key })
          assert.strictEqual(list.status, 200, list.text)
          const file = list.json.data.find((entry: any) => entry.name === name)
          if (file !== undefined) return { list: list.json, file }
          yield* Effect.sleep("100 millis")
        }
        return assert.fail(`no ${name} in the downloads`)
      })

    it.effect(
      "a file a puppeteer page downloaded is listed and served, during the session and after it ends",
      () =>
        Effect.gen(function* () {
          const { service, key, id, cdpUrl } = yield* session
          const files = yield* site
          const browser = yield* Effect.promise(() =>
            puppeteer.connect({ browserWSEndpoint: cdpUrl, headers: { Authorization: `Bearer ${key}` } })
          )
          const page = yield* Effect.promise(() => browser.newPage())
          yield* Effect.promise(() => page.goto(`${files.url}/`))
          // No download behavior set by the client: the browser's default is the session's folder.
          yield* Effect.promise(() => page.click("#get"))
          const { list, file } = yield* listed(key, id, "report.csv")
          assert.strictEqual(list.object, "list")
          assert.strictEqual(file.size, files.bytes.length)
          assert.isString(file.modified_at)

          const got = yield* api("GET", `/v1/sessions/${id}/download?path=report.csv`, { key })
          assert.strictEqual(got.status, 200)
          assert.strictEqual(got.headers.get("content-length"), String(files.bytes.length))
          assert.include(got.headers.get("content-disposition") ?? "", "report.csv")
          assert.isTrue(Buffer.from(got.bytes).equals(files.bytes), "the very bytes the site sent")

          for (const path of ["../report.csv", "/etc/passwd", "a/../../b", ""]) {
            const refused = yield* api(
              "GET",
              `/v1/sessions/${id}/download?path=${encodeURIComponent(path)}`,
              {
                key
              }
            )
            assert.strictEqual(refused.status, 400, path)
            assert.deepStrictEqual(refused.json.error.code, "invalid_field")
          }
          const missing = yield* api("GET", `/v1/sessions/${id}/download?path=nothing.csv`, { key })
          assert.strictEqual(missing.status, 404)
          assert.strictEqual(missing.json.error.code, "file_not_found")
          const stranger = yield* signUp(service.baseUrl)
          const foreign = yield* api("GET", `/v1/sessions/${id}/downloads`, { key: stranger.key })
          assert.strictEqual(foreign.status, 404, "another account's session is not found")

          yield* Effect.promise(() => browser.disconnect())
          const ended = yield* api("DELETE", `/v1/sessions/${id}`, { key })
          assert.strictEqual(ended.status, 204)
          yield* waitForSession(service.baseUrl, key, id, (s) => s.status === "closed")
          // The browser is gone (its profile with it); the downloads stay, the service's own now.
          const dir = BrowserDownloads.dirOf(service.config.dataDir, id)
          for (let i = 0; i < 50 && Fs.statSync(dir).uid !== 0; i++) yield* Effect.sleep("100 millis")
          assert.strictEqual(Fs.statSync(dir).uid, 0, "sealed at the end: the browser's uid cannot enter it")
          assert.strictEqual(Fs.statSync(dir).mode & 0o777, 0o700)
          const after = yield* listed(key, id, "report.csv")
          assert.strictEqual(after.file.size, files.bytes.length)
          const again = yield* api("GET", `/v1/sessions/${id}/download?path=report.csv`, { key })
          assert.strictEqual(again.status, 200)
          assert.isTrue(Buffer.from(again.bytes).equals(files.bytes), "served after the session ended")
        })
    )

    it.effect(
      "playwright sees its download event, the file lands in the session's folder whatever path it asked for, and the API serves it",
      () =>
        Effect.gen(function* () {
          const { key, id, cdpUrl } = yield* session
          const files = yield* site
          const browser = yield* Effect.promise(() =>
            chromium.connectOverCDP(cdpUrl, { headers: { Authorization: `Bearer ${key}` } })
          )
          const page = yield* Effect.promise(() => browser.contexts()[0]!.newPage())
          yield* Effect.promise(() => page.goto(`${files.url}/`))
          const [download] = yield* Effect.promise(() =>
            Promise.all([page.waitForEvent("download"), page.click("#get")])
          )
          assert.strictEqual(download.suggestedFilename(), "report.csv")
          // Playwright names the file by its own guid (behavior allowAndName) in the session's folder.
          const named = yield* Effect.gen(function* () {
            for (let i = 0; i < 100; i++) {
              const list = yield* api("GET", `/v1/sessions/${id}/downloads`, { key })
              const done = list.json.data.find((entry: any) => entry.size === files.bytes.length)
              if (done !== undefined) return done.name as string
              yield* Effect.sleep("100 millis")
            }
            return assert.fail("the download never finished")
          })
          const got = yield* api("GET", `/v1/sessions/${id}/download?path=${encodeURIComponent(named)}`, {
            key
          })
          assert.isTrue(Buffer.from(got.bytes).equals(files.bytes))
          yield* Effect.promise(() => browser.close())
          yield* api("DELETE", `/v1/sessions/${id}`, { key })
        })
    )

    it.effect("a sandbox session has no browser downloads", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const created = yield* api("POST", "/v1/sessions", {
          key: account.key,
          body: { session_type: "sandbox" }
        })
        assert.strictEqual(created.status, 201, created.text)
        const listing = yield* api("GET", `/v1/sessions/${created.json.id}/downloads`, { key: account.key })
        assert.strictEqual(listing.status, 409)
        assert.strictEqual(listing.json.error.code, "session_type_mismatch")
        yield* api("DELETE", `/v1/sessions/${created.json.id}`, { key: account.key })
      })
    )
  }
)

plain.effect(
  "the retention sweep removes downloads of sessions ended long enough ago, never a live one's",
  () =>
    Effect.gen(function* () {
      const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "rbs-downloads-"))
      const old = new Date(Date.now() - 25 * 3_600_000)
      for (const id of ["ended-long-ago", "ended-just-now", "live-for-long"]) {
        const dir = BrowserDownloads.dirOf(dataDir, id)
        Fs.mkdirSync(dir, { recursive: true })
        Fs.writeFileSync(Path.join(dir, "f.txt"), id)
        if (id !== "ended-just-now") Fs.utimesSync(dir, old, old)
      }
      const removed = yield* BrowserDownloads.sweep(dataDir, 24 * 3_600_000, (id) => id === "live-for-long")
      assert.strictEqual(removed, 1)
      assert.deepStrictEqual(Fs.readdirSync(Path.join(dataDir, "downloads")).sort(), [
        "ended-just-now",
        "live-for-long"
      ])
      Fs.rmSync(dataDir, { recursive: true, force: true })
    })
)

plain.effect(
  "a link in the downloads dir is refused, a missing file is not found, and a dir that is not there lists and seals as empty",
  () =>
    Effect.gen(function* () {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "rbs-downloads-"))
      Fs.writeFileSync(Path.join(dir, "real.txt"), "bytes")
      // A page may name its download anything; a link planted there never leads out.
      Fs.symlinkSync("/etc/passwd", Path.join(dir, "link.txt"))
      const linked = yield* Effect.flip(BrowserDownloads.serve(dir, "link.txt"))
      assert.strictEqual(linked._tag, "InvalidField")
      const missing = yield* Effect.flip(BrowserDownloads.serve(dir, "nothing.txt"))
      assert.strictEqual(missing._tag, "FileNotFound")
      assert.deepStrictEqual(
        (yield* BrowserDownloads.list(dir)).map((file) => file.name),
        ["real.txt"]
      )
      const gone = Path.join(dir, "gone")
      assert.deepStrictEqual(yield* BrowserDownloads.list(gone), [])
      yield* BrowserDownloads.seal(gone)
      assert.isFalse(Fs.existsSync(gone))
      Fs.rmSync(dir, { recursive: true, force: true })
    })
)
