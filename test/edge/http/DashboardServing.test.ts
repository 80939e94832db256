import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import { request } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

// A build of the dashboard's shape (the real one is checked in a browser by the end-to-end tests).
const build = Path.join(TestService.TEST_ROOT, "dashboard-build")
const script = `console.log(${JSON.stringify("x".repeat(5000))})`
Fs.mkdirSync(Path.join(build, "assets"), { recursive: true })
Fs.writeFileSync(
  Path.join(build, "index.html"),
  '<!doctype html><html><head><script type="module" src="/assets/index-abc123.js"></script></head><body></body></html>'
)
Fs.writeFileSync(Path.join(build, "assets", "index-abc123.js"), script)
// Compressed by the build (at its lowest levels here, so they differ from what the service would make).
const prebuilt = Path.join(build, "assets", "prebuilt-def456.js")
Fs.writeFileSync(prebuilt, script)
const prebuiltBr = Zlib.brotliCompressSync(script, { params: { [Zlib.constants.BROTLI_PARAM_QUALITY]: 1 } })
Fs.writeFileSync(`${prebuilt}.br`, prebuiltBr)
Fs.writeFileSync(`${prebuilt}.gz`, Zlib.gzipSync(script, { level: 1 }))
// A compressed form older than its file is of an earlier build: not served.
const stale = Path.join(build, "assets", "stale-789abc.js")
Fs.writeFileSync(stale, script)
Fs.writeFileSync(`${stale}.br`, Zlib.brotliCompressSync("an earlier build"))
Fs.utimesSync(`${stale}.br`, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000))

/** The bytes as sent (fetch would decode what it asked for). */
const getRaw = (url: string, acceptEncoding: string) =>
  Effect.promise(
    () =>
      new Promise<{ status: number; encoding: string | undefined; body: Buffer }>((resolve, reject) => {
        Http.get(url, { headers: { "accept-encoding": acceptEncoding } }, (response) => {
          const chunks: Array<Buffer> = []
          response.on("data", (chunk) => chunks.push(chunk))
          response.on("end", () =>
            resolve({
              status: response.statusCode ?? 0,
              encoding: response.headers["content-encoding"],
              body: Buffer.concat(chunks)
            })
          )
        }).on("error", reject)
      })
  )

const Service = TestService.layer({ browserPoolSize: 0, dashboardDir: build })

layer(Service)("dashboard serving", (it) => {
  it.effect("serves its page with a strict CSP, never framed, never cached stale", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const page = yield* request(service.baseUrl, "GET", "/")
      assert.strictEqual(page.status, 200)
      assert.strictEqual(page.headers.get("content-type"), "text/html; charset=utf-8")
      assert.include(page.text, "/assets/index-abc123.js")
      const csp = page.headers.get("content-security-policy") ?? ""
      for (const directive of [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'"
      ]) {
        assert.include(csp, directive)
      }
      assert.notInclude(csp, "unsafe-inline")
      assert.notInclude(csp, "unsafe-eval")
      assert.strictEqual(page.headers.get("x-frame-options"), "DENY")
      assert.strictEqual(page.headers.get("cache-control"), "no-cache")
      assert.strictEqual(page.headers.get("x-content-type-options"), "nosniff")
    })
  )

  it.effect("serves hashed assets for a year, compressed when the client accepts it", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const plain = yield* request(service.baseUrl, "GET", "/assets/index-abc123.js", {
        headers: { "accept-encoding": "identity" }
      })
      assert.strictEqual(plain.status, 200)
      assert.strictEqual(plain.text, script)
      assert.strictEqual(plain.headers.get("cache-control"), "public, max-age=31536000, immutable")
      assert.strictEqual(plain.headers.get("content-type"), "text/javascript; charset=utf-8")
      const raw = yield* getRaw(`${service.baseUrl}/assets/index-abc123.js`, "br, gzip")
      assert.strictEqual(raw.encoding, "br")
      assert.isBelow(raw.body.length, script.length / 10)
      assert.strictEqual(Zlib.brotliDecompressSync(raw.body).toString(), script)
    })
  )

  it.effect("serves the compressed forms the build wrote as they are, unless older than their file", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const br = yield* getRaw(`${service.baseUrl}/assets/prebuilt-def456.js`, "br, gzip")
      assert.strictEqual(br.encoding, "br")
      assert.deepStrictEqual(br.body, prebuiltBr)
      const gz = yield* getRaw(`${service.baseUrl}/assets/prebuilt-def456.js`, "gzip")
      assert.strictEqual(gz.encoding, "gzip")
      assert.deepStrictEqual(gz.body, Fs.readFileSync(`${prebuilt}.gz`))
      // The compressed files are forms of an asset, not assets of their own.
      assert.strictEqual(
        (yield* getRaw(`${service.baseUrl}/assets/prebuilt-def456.js.br`, "identity")).status,
        404
      )
      const fresh = yield* getRaw(`${service.baseUrl}/assets/stale-789abc.js`, "br")
      assert.strictEqual(fresh.encoding, "br")
      assert.strictEqual(Zlib.brotliDecompressSync(fresh.body).toString(), script)
    })
  )

  it.effect("answers 404 in the API's error shape for anything else under /assets", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      for (const path of [
        "/assets/missing.js",
        "/assets/..%2Findex.html",
        "/assets/%2E%2E%2F%2E%2E%2Fpackage.json"
      ]) {
        const response = yield* request(service.baseUrl, "GET", path)
        assert.strictEqual(response.status, 404, path)
        assert.strictEqual(response.json.error.code, "not_found")
      }
    })
  )
})
