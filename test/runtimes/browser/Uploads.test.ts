import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type * as Net from "node:net"
import { chromium } from "playwright-core"
import puppeteer from "puppeteer-core"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

/** A form whose file input shows the chosen file's name, size and SHA-256 in `#seen`. */
const FORM =
  `<!doctype html><html><head><title>form</title></head><body>` +
  `<input type="file" id="file"><pre id="seen"></pre><script>` +
  `file.addEventListener("change", async () => { const chosen = file.files[0];` +
  ` const digest = await crypto.subtle.digest("SHA-256", await chosen.arrayBuffer());` +
  ` seen.textContent = [chosen.name, chosen.size, [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("")].join(" ") })` +
  `</script></body></html>`

const site = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ readonly url: string; readonly server: Http.Server }>((resolve) => {
        const server = Http.createServer((_request, response) => {
          response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
          response.end(FORM)
        })
        server.listen(0, "127.0.0.1", () =>
          resolve({ url: `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}/`, server })
        )
      })
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

const uploadTo = (baseUrl: string, key: string, id: string, name: string, bytes: Uint8Array) =>
  Effect.promise(async () => {
    const form = new FormData()
    form.append("file", new Blob([bytes]), name)
    const response = await fetch(`${baseUrl}/v1/sessions/${id}/uploads`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
      body: form
    })
    return { status: response.status, json: (await response.json()) as any }
  })

layer(TestService.layer({ browserPoolSize: 1 }), { excludeTestServices: true })(
  "files into the page",
  (it) => {
    for (const isolation of ["browser", "context"] as const) {
      it.effect(
        `a ${isolation} session: a file uploaded through the route reaches a form with puppeteer's uploadFile; a host path is still refused`,
        () =>
          Effect.gen(function* () {
            const service = yield* TestService.TestService
            const { key } = yield* signUp(service.baseUrl)
            const form = yield* site
            const created = yield* request(service.baseUrl, "POST", "/v1/sessions", {
              key,
              body: { isolation }
            })
            assert.strictEqual(created.status, 201, created.text)
            const id = created.json.id as string
            yield* waitForSession(service.baseUrl, key, id, isReady)
            const bytes = Crypto.randomBytes(200_000)
            const uploaded = yield* uploadTo(service.baseUrl, key, id, "report.pdf", bytes)
            assert.strictEqual(uploaded.status, 200, JSON.stringify(uploaded.json))
            assert.strictEqual(uploaded.json.object, "upload")
            assert.strictEqual(uploaded.json.name, "report.pdf")
            assert.strictEqual(uploaded.json.size, bytes.length)
            assert.match(uploaded.json.path, /\/report\.pdf$/)

            const browser = yield* Effect.promise(() =>
              puppeteer.connect({
                browserWSEndpoint: created.json.cdp_url,
                headers: { Authorization: `Bearer ${key}` }
              })
            )
            const page = yield* Effect.promise(() => browser.newPage())
            yield* Effect.promise(() => page.goto(form.url))
            const input = (yield* Effect.promise(() => page.$("#file")))!
            yield* Effect.promise(() => input.uploadFile(uploaded.json.path))
            yield* Effect.promise(() =>
              page.waitForFunction(() => (globalThis as any).seen.textContent !== "")
            )
            const seen = yield* Effect.promise(() => page.$eval("#seen", (each) => each.textContent))
            const digest = Crypto.createHash("sha256").update(bytes).digest("hex")
            assert.strictEqual(seen, `report.pdf ${bytes.length} ${digest}`, "the very bytes, in the page")

            // Nothing else of the host: a path outside the session's uploads is refused by the guard.
            const refused = yield* Effect.promise(() =>
              input.uploadFile("/etc/hostname").then(
                () => "accepted",
                (error: Error) => error.message
              )
            )
            assert.match(refused, /a file input takes only the session's own uploads/)
            yield* Effect.promise(() => browser.disconnect())
            assert.strictEqual(
              (yield* request(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })).status,
              204
            )
            assert.isTrue(Fs.existsSync(uploaded.json.path), "kept with the downloads until their retention")
          })
      )
    }

    it.effect("playwright's setInputFiles hands the page the file's bytes over CDP, with no upload", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const form = yield* site
        const created = yield* request(service.baseUrl, "POST", "/v1/sessions", { key, body: {} })
        const id = created.json.id as string
        yield* waitForSession(service.baseUrl, key, id, isReady)
        const browser = yield* Effect.promise(() =>
          chromium.connectOverCDP(created.json.cdp_url, { headers: { Authorization: `Bearer ${key}` } })
        )
        const page = yield* Effect.promise(() => browser.contexts()[0]!.newPage())
        yield* Effect.promise(() => page.goto(form.url))
        const bytes = Crypto.randomBytes(50_000)
        yield* Effect.promise(() =>
          page.setInputFiles("#file", { name: "notes.txt", mimeType: "text/plain", buffer: bytes })
        )
        yield* Effect.promise(() => page.waitForFunction(() => (globalThis as any).seen.textContent !== ""))
        const seen = yield* Effect.promise(() => page.textContent("#seen"))
        assert.strictEqual(
          seen,
          `notes.txt ${bytes.length} ${Crypto.createHash("sha256").update(bytes).digest("hex")}`
        )
        yield* Effect.promise(() => browser.close())
        yield* request(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })
      })
    )

    it.effect(
      "names that are not plain, files over 16 MiB and sandboxes are refused, in the API's shape",
      () =>
        Effect.gen(function* () {
          const service = yield* TestService.TestService
          const { key } = yield* signUp(service.baseUrl)
          const created = yield* request(service.baseUrl, "POST", "/v1/sessions", { key, body: {} })
          const id = created.json.id as string
          yield* waitForSession(service.baseUrl, key, id, isReady)
          for (const name of ["../x", ".hidden", "a/b"]) {
            const refused = yield* uploadTo(service.baseUrl, key, id, name, new Uint8Array([1]))
            assert.strictEqual(refused.status, 400, name)
            assert.deepStrictEqual(refused.json.error.code, "invalid_field", name)
          }
          const over = yield* uploadTo(
            service.baseUrl,
            key,
            id,
            "big.bin",
            new Uint8Array(16 * 1024 * 1024 + 1)
          )
          assert.strictEqual(over.status, 413)
          assert.strictEqual(over.json.error.code, "file_too_large")
          yield* request(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })

          const sandbox = yield* request(service.baseUrl, "POST", "/v1/sessions", {
            key,
            body: { session_type: "sandbox" }
          })
          yield* waitForSession(service.baseUrl, key, sandbox.json.id, isReady, 60_000)
          const mismatch = yield* uploadTo(
            service.baseUrl,
            key,
            sandbox.json.id,
            "x.txt",
            new Uint8Array([1])
          )
          assert.strictEqual(mismatch.status, 409)
          assert.strictEqual(mismatch.json.error.code, "session_type_mismatch")
          yield* request(service.baseUrl, "DELETE", `/v1/sessions/${sandbox.json.id}`, { key })
        })
    )
  }
)
