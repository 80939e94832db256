import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { chromium } from "playwright-core"
import puppeteer, { type Browser } from "puppeteer-core"
import { isReady, metricValue, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"
import * as TrafficServer from "../../support/TrafficServer.ts"
import * as UpstreamProxies from "../../support/UpstreamProxies.ts"

const USER = "proxy-user"
// Characters a URL's userinfo must escape: the upstream is handed them as they were given.
const PASSWORD = "s3cret:p@ss/w%rd#1"

layer(TestService.layer({ browserPoolSize: 1 }), { excludeTestServices: true })(
  "a session through the caller's own proxy",
  (it) => {
    const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
      Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

    /** A ready session made with `body`, and puppeteer on it (disconnected with the scope). */
    const session = (key: string, body: object) =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const created = yield* api("POST", "/v1/sessions", { key, body })
        assert.strictEqual(created.status, 201, created.text)
        assert.notInclude(created.text, PASSWORD)
        const ready = yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
        const browser = yield* Effect.acquireRelease(
          Effect.promise(() =>
            puppeteer.connect({
              browserWSEndpoint: created.json.cdp_url,
              headers: { Authorization: `Bearer ${key}` }
            })
          ),
          (browser: Browser) => Effect.promise(() => browser.disconnect())
        )
        const page = (yield* Effect.promise(() => browser.pages()))[0]!
        return { id: created.json.id as string, ready, page }
      })

    /** What the page got for `url`: its status, or the error Chromium gave. */
    const visit = (page: Awaited<ReturnType<Browser["newPage"]>>, url: string) =>
      Effect.promise(() =>
        page.goto(url).then(
          (response) => String(response?.status()),
          (error: Error) => error.message
        )
      )

    for (const scheme of ["http", "socks5"] as const) {
      it.effect(
        `through a ${scheme} upstream with credentials: the upstream carries the page's requests, the service meters and bills them, and the credentials are shown nowhere`,
        () =>
          Effect.gen(function* () {
            const service = yield* TestService.TestService
            const { key } = yield* signUp(service.baseUrl)
            const site = yield* TrafficServer.serve("127.0.0.1")
            const upstream = yield* (scheme === "http" ? UpstreamProxies.http : UpstreamProxies.socks5)(
              USER,
              PASSWORD
            )
            const server = `${scheme}://127.0.0.1:${upstream.port}`
            const { id, ready, page } = yield* session(key, {
              proxy: { server, username: USER, password: PASSWORD }
            })
            assert.deepStrictEqual(ready.proxy, { server, bypass: [], last_error: null })
            assert.strictEqual(ready.proxy_region, "custom")
            assert.strictEqual(yield* visit(page, `${site.http}/page`), "200")
            const fetched = yield* Effect.promise(() =>
              page.evaluate(
                async (url) => (await (await fetch(url)).arrayBuffer()).byteLength,
                `${site.http}/bytes?n=300000`
              )
            )
            assert.strictEqual(fetched, 300_000)
            // Playwright's pages go the same way: the proxy is the browser's, not the client's.
            const playwright = yield* Effect.acquireRelease(
              Effect.promise(() =>
                chromium.connectOverCDP(ready.cdp_url, { headers: { Authorization: `Bearer ${key}` } })
              ),
              (browser) => Effect.promise(() => browser.close())
            )
            const other = yield* Effect.promise(() => playwright.contexts()[0]!.newPage())
            const before = site.requests().filter((each) => each === "GET /page").length
            const answer = yield* Effect.promise(() => other.goto(`${site.http}/page?from=playwright`))
            assert.strictEqual(answer?.status(), 200)
            assert.strictEqual(
              site.requests().filter((each) => each === "GET /page").length,
              before + 1,
              "playwright's page reached the site"
            )
            assert.isNotEmpty(upstream.destinations, "the upstream carried them")
            for (const destination of upstream.destinations)
              assert.strictEqual(destination, `127.0.0.1:${site.port}`)
            assert.isEmpty(upstream.refused)

            assert.strictEqual((yield* api("DELETE", `/v1/sessions/${id}`, { key })).status, 204)
            const ended = yield* waitForSession(service.baseUrl, key, id, (s) => s.status === "closed")
            assert.isAbove(ended.bytes_down, 300_000, "metered as any session's bytes")
            assert.strictEqual(ended.proxy_ip, "127.0.0.1")

            // Nowhere to be read: the API's answers, the audit trail, the row at rest.
            const listed = yield* api("GET", "/v1/sessions", { key })
            const audit = yield* api("GET", "/v1/audit", { key })
            for (const text of [listed.text, audit.text, JSON.stringify(ended)]) {
              assert.notInclude(text, PASSWORD)
              assert.notInclude(text, USER)
            }
            const sql = yield* SqlClient.SqlClient
            const [row] = yield* sql<{ proxy: unknown }>`SELECT proxy FROM sessions WHERE id = ${id}`
            assert.notInclude(JSON.stringify(row!.proxy), PASSWORD, "sealed at rest")
            assert.notInclude(JSON.stringify(row!.proxy), USER, "sealed at rest")
          })
      )
    }

    it.effect(
      "a wrong password, a dead upstream and one at the service's own port each give the page an error, never the direct path",
      () =>
        Effect.gen(function* () {
          const service = yield* TestService.TestService
          const { key } = yield* signUp(service.baseUrl)
          const site = yield* TrafficServer.serve("127.0.0.1")
          const upstream = yield* UpstreamProxies.http(USER, PASSWORD)
          const dead = yield* TestService.freePort
          // The metering proxy's answers: 597 the upstream refused the login, 594 it refused the
          // connection, 403 the address policy refused the upstream itself.
          // The session says why, and the reason is counted.
          const cases = [
            [
              { server: `http://127.0.0.1:${upstream.port}`, username: USER, password: "wrong" },
              "597",
              "auth_failed"
            ],
            [{ server: `http://127.0.0.1:${dead}` }, "594", "unreachable"],
            [{ server: `http://127.0.0.1:${new URL(service.baseUrl).port}` }, "403", "address_refused"]
          ] as const
          const counted = (reason: string) =>
            api("GET", "/metrics").pipe(
              Effect.map((answer) =>
                metricValue(answer.text, "rbs_egress_upstream_failures_total", `reason="${reason}"`)
              )
            )
          for (const [proxy, expected, reason] of cases) {
            const before = yield* counted(reason)
            const { id, ready, page } = yield* session(key, { proxy })
            assert.isNull(ready.proxy.last_error, "no failure before a request")
            const answer = yield* visit(page, `${site.http}/page?case=${encodeURIComponent(proxy.server)}`)
            assert.strictEqual(answer, expected, proxy.server)
            assert.isFalse(
              site.requests().some((each) => each.startsWith("GET /page")),
              `${proxy.server}: the site was never reached directly`
            )
            const seen = yield* waitForSession(
              service.baseUrl,
              key,
              id,
              (each) => each?.proxy?.last_error != null
            )
            assert.strictEqual(seen.proxy.last_error.reason, reason, proxy.server)
            assert.strictEqual(String(seen.proxy.last_error.status), expected, proxy.server)
            assert.isAtLeast(seen.proxy.last_error.failures, 1)
            assert.isAbove(yield* counted(reason), before, `${reason} is counted`)
            yield* api("DELETE", `/v1/sessions/${id}`, { key })
            const ended = yield* api("GET", `/v1/sessions/${id}`, { key })
            assert.strictEqual(ended.json.proxy.last_error.reason, reason, "kept once it ended")
          }
          assert.isNotEmpty(upstream.refused)
          for (const login of upstream.refused) assert.strictEqual(login, `${USER}:wrong`)
        })
    )

    it.effect("a sandbox's traffic goes through the caller's proxy too", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const site = yield* TrafficServer.serve("127.0.0.1")
        const upstream = yield* UpstreamProxies.http(USER, PASSWORD)
        const created = yield* api("POST", "/v1/sessions", {
          key,
          body: {
            session_type: "sandbox",
            proxy: { server: `http://127.0.0.1:${upstream.port}`, username: USER, password: PASSWORD }
          }
        })
        assert.strictEqual(created.status, 201, created.text)
        const id = created.json.id as string
        yield* waitForSession(service.baseUrl, key, id, isReady, 60_000)
        // --noproxy '': the sandbox's NO_PROXY keeps its own loopback local; this is the host's.
        const ran = yield* api("POST", `/v1/sessions/${id}/exec`, {
          key,
          body: {
            command: `curl -sS --noproxy '' -o /dev/null -w '%{http_code}' '${site.http}/bytes?n=1000'`
          }
        })
        assert.strictEqual(ran.json.stdout, "200", ran.text)
        assert.deepStrictEqual(upstream.destinations, [`127.0.0.1:${site.port}`])
        assert.strictEqual((yield* api("DELETE", `/v1/sessions/${id}`, { key })).status, 204)
      })
    )

    it.effect("a host on the bypass list is reached without the upstream, still metered", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const site = yield* TrafficServer.serve("127.0.0.1")
        const upstream = yield* UpstreamProxies.http(USER, PASSWORD)
        const { id, page } = yield* session(key, {
          proxy: {
            // Named, so the upstream's name (`proxy_ip`) and the direct path's address differ.
            server: `http://localhost:${upstream.port}`,
            username: USER,
            password: PASSWORD,
            bypass: ["127.0.0.1"]
          }
        })
        assert.strictEqual(yield* visit(page, `${site.http}/page`), "200")
        assert.isEmpty(upstream.destinations)
        assert.strictEqual((yield* api("DELETE", `/v1/sessions/${id}`, { key })).status, 204)
        const ended = yield* waitForSession(service.baseUrl, key, id, (s) => s.status === "closed")
        assert.isAbove(ended.bytes_down, 0)
        assert.strictEqual(ended.proxy_ip, "localhost", "the upstream, though the host bypassed it")
      })
    )

    it.effect("a proxy that is not one, or with a region, is 400 invalid_field naming proxy", () =>
      Effect.gen(function* () {
        const { key } = yield* Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))
        for (const proxy of [
          { server: "ftp://127.0.0.1:21" },
          { server: "http://127.0.0.1" },
          { server: `http://${USER}:${PASSWORD}@127.0.0.1:3128` },
          { server: "http://127.0.0.1:3128/path" },
          { server: "not a url" },
          { server: "http://127.0.0.1:3128", bypass: ["a b"] },
          { server: "http://127.0.0.1:3128", username: "a:b", password: PASSWORD },
          { server: "http://127.0.0.1:3128", extra: true }
        ]) {
          const refused = yield* api("POST", "/v1/sessions", { key, body: { proxy } })
          assert.deepStrictEqual(
            refused.json,
            { error: { code: "invalid_field", message: "Invalid value for field: proxy." } },
            JSON.stringify(proxy)
          )
          assert.notInclude(refused.text, PASSWORD)
        }
        const both = yield* api("POST", "/v1/sessions", {
          key,
          body: { proxy: { server: "http://127.0.0.1:3128" }, region: "local" }
        })
        assert.strictEqual(both.json.error.code, "invalid_field")
        assert.deepStrictEqual(
          (yield* api("GET", "/v1/sessions", { key })).json.data,
          [],
          "nothing was created"
        )
      })
    )
  }
)
