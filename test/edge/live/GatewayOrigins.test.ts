import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { type Browser, chromium } from "playwright-core"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { until } from "../../support/Poll.ts"
import * as TestService from "../../support/TestService.ts"

// The gateway at per-session origins (GATEWAY_DOMAIN) in a real Chromium, which resolves every name
// under `.localhost` to this machine: an app with storage and a service worker at its own origin.

const DOMAIN = "rbs.localhost"

/** A small app: a page that registers a service worker and keeps a note in localStorage. */
const SITE = {
  "index.html": `<!doctype html><title>app</title><script>
window.ready = (async () => {
  const registration = await navigator.serviceWorker.register("/sw.js")
  await navigator.serviceWorker.ready
  return { scope: registration.scope, before: localStorage.getItem("who") }
})()
</script>`,
  "sw.js": `self.addEventListener("install", () => self.skipWaiting())
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()))
self.addEventListener("fetch", (event) => {
  if (new URL(event.request.url).pathname === "/from-worker")
    event.respondWith(new Response("answered by the service worker"))
})`
}

/** Serves the app on 127.0.0.1:8000 in the sandbox and logs each request's Cookie header. */
const SERVER = `
import http.server
class Handler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        with open("/root/seen.log", "a") as log:
            log.write("cookie=" + (self.headers.get("Cookie") or "") + " auth=" + (self.headers.get("Authorization") or "") + "\\n")
        super().end_headers()
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), Handler).serve_forever()
`

const launch = Effect.acquireRelease(
  Effect.promise(() => chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] })),
  (browser: Browser) => Effect.promise(() => browser.close())
)

layer(TestService.layer({ browserPoolSize: 0, gatewayDomain: DOMAIN, sandbox: { poolSize: 0 } }), {
  excludeTestServices: true
})("the gateway at per-session origins", (it) => {
  it.effect(
    "an app with localStorage and a service worker works at its own origin, apart from another session's, and never gets the service's cookie",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const user = yield* signUp(service.baseUrl)
        const api = (method: string, path: string, body?: unknown) =>
          request(service.baseUrl, method, path, { key: user.key, ...(body === undefined ? {} : { body }) })

        const sandbox = Effect.gen(function* () {
          const created = yield* api("POST", "/v1/sessions", { session_type: "sandbox" })
          assert.strictEqual(created.status, 201, created.text)
          const id = (yield* waitForSession(service.baseUrl, user.key, created.json.id, isReady)).id as string
          for (const [name, text] of Object.entries({ ...SITE, "server.py": SERVER })) {
            const form = new FormData()
            form.append("path", name === "server.py" ? name : `site/${name}`)
            form.append("file", new Blob([text]))
            const uploaded = yield* Effect.promise(() =>
              fetch(`${service.baseUrl}/v1/sessions/${id}/upload`, {
                method: "POST",
                headers: { authorization: `Bearer ${user.key}` },
                body: form
              })
            )
            assert.strictEqual(uploaded.status, 200)
          }
          yield* api("POST", `/v1/sessions/${id}/exec`, {
            command: "cd /root/site && exec python3 /root/server.py",
            background: true
          })
          const link = yield* api("POST", `/v1/sessions/${id}/gateway-token`, { port: 8000 })
          assert.strictEqual(link.status, 200, link.text)
          return { id, url: link.json.url as string }
        })
        const a = yield* sandbox
        const b = yield* sandbox
        const origin = (id: string) => `http://8000-${id}.${DOMAIN}:${new URL(service.baseUrl).port}`
        assert.strictEqual(a.url.split("?")[0], `${origin(a.id)}/`, "the link is the session's own origin")

        const browser = yield* launch
        const context = yield* Effect.promise(() => browser.newContext())
        // The visitor is logged in to the service (its dashboard cookie on the service's origin).
        const [name, value] = user.cookie.split("=")
        yield* Effect.promise(() =>
          context.addCookies([{ name: name!, value: value!, url: service.baseUrl, httpOnly: true }])
        )
        const page = yield* Effect.promise(() => context.newPage())
        const open = (url: string) =>
          Effect.gen(function* () {
            // The app's server may still be starting: the first answers are 502.
            return yield* until(
              Effect.promise(() => page.goto(url).then((response) => response?.status() ?? 0)),
              (status) => status === 200,
              15_000
            )
          })

        yield* open(a.url)
        assert.strictEqual(page.url(), `${origin(a.id)}/`, "the link's token left the URL")
        const first = (yield* Effect.promise(() => page.evaluate("window.ready"))) as any
        assert.deepStrictEqual(first, { scope: `${origin(a.id)}/`, before: null })
        yield* Effect.promise(() => page.evaluate(`localStorage.setItem("who", "a")`))
        // Its service worker controls the page once reloaded, and answers for it.
        yield* Effect.promise(() => page.reload())
        const fromWorker = yield* Effect.promise(() =>
          page.evaluate(`fetch("/from-worker").then((response) => response.text())`)
        )
        assert.strictEqual(fromWorker, "answered by the service worker")
        const again = (yield* Effect.promise(() => page.evaluate("window.ready"))) as any
        assert.strictEqual(again.before, "a", "its storage stays at its origin")
        const response = yield* Effect.promise(() => page.goto(`${origin(a.id)}/index.html`))
        assert.isUndefined(response!.headers()["content-security-policy"], "no opaque origin needed")

        // Another session's app: its own origin, none of the first one's storage or worker.
        yield* open(b.url)
        const other = (yield* Effect.promise(() => page.evaluate("window.ready"))) as any
        assert.deepStrictEqual(other, { scope: `${origin(b.id)}/`, before: null })
        // The first session's link cookie is its host's alone: without a link, the other host refuses.
        const fresh = yield* Effect.promise(() => browser.newContext())
        const stranger = yield* Effect.promise(() => fresh.newPage())
        const refused = yield* Effect.promise(() => stranger.goto(`${origin(a.id)}/`))
        assert.strictEqual(refused!.status(), 401)
        yield* Effect.promise(() => fresh.close())

        // What the programs were sent: never the service's cookie, its link cookie or a key.
        for (const { id } of [a, b]) {
          const seen = yield* api("POST", `/v1/sessions/${id}/exec`, { command: "cat /root/seen.log" })
          assert.isAbove(seen.json.stdout.length, 0)
          assert.notInclude(seen.json.stdout, "service_session")
          assert.notInclude(seen.json.stdout, "rbs_gateway")
          assert.notInclude(seen.json.stdout, "Bearer")
        }

        // A name under the domain that is no session's port reaches nothing of the service.
        const port = new URL(service.baseUrl).port
        const nothing = yield* Effect.promise(() => browser.newPage())
        const api404 = yield* Effect.promise(() => nothing.goto(`http://api.${DOMAIN}:${port}/v1/sessions`))
        assert.strictEqual(api404!.status(), 404)
        yield* Effect.promise(() => nothing.close())
        for (const { id } of [a, b]) yield* api("DELETE", `/v1/sessions/${id}`)
      }).pipe(Effect.scoped),
    120_000
  )
})
