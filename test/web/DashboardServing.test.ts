import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import { request } from "../support/Client.ts"
import * as TestService from "../support/TestService.ts"

// A build of the dashboard's shape (the real one is checked in a browser by the end-to-end tests).
const build = Path.join(TestService.TEST_ROOT, "dashboard-build")
const script = `console.log(${JSON.stringify("x".repeat(5000))})`
Fs.mkdirSync(Path.join(build, "assets"), { recursive: true })
Fs.writeFileSync(
  Path.join(build, "index.html"),
  '<!doctype html><html><head><script type="module" src="/assets/index-abc123.js"></script></head><body></body></html>'
)
Fs.writeFileSync(Path.join(build, "assets", "index-abc123.js"), script)

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
      // fetch decodes what it asked for: read the compressed bytes with a raw request.
      const raw = yield* Effect.promise(
        () =>
          new Promise<{ encoding: string | undefined; body: Buffer }>((resolve) => {
            const url = new URL(`${service.baseUrl}/assets/index-abc123.js`)
            import("node:http").then((Http) =>
              Http.get(url, { headers: { "accept-encoding": "br, gzip" } }, (response) => {
                const chunks: Array<Buffer> = []
                response.on("data", (chunk) => chunks.push(chunk))
                response.on("end", () =>
                  resolve({ encoding: response.headers["content-encoding"], body: Buffer.concat(chunks) })
                )
              })
            )
          })
      )
      assert.strictEqual(raw.encoding, "br")
      assert.isBelow(raw.body.length, script.length / 10)
      assert.strictEqual(Zlib.brotliDecompressSync(raw.body).toString(), script)
    })
  )

  it.effect("answers 404 in the spec's shape for anything else under /assets", () =>
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
