import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { chromium } from "playwright-core"
import puppeteer, { type Browser } from "puppeteer-core"
import { metricValue, openSession, PNG_SIGNATURE, request, signUp } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"

// Sessions of `isolation: "context"`: a browser context in a Chromium the
// account's context sessions share, through the service end to end.

// A shared browser serves 3 sessions, and closes 2 s after its account's last one.
const SERVES = 3
const IDLE_SECONDS = 2

layer(
  TestService.layer({
    browserPoolSize: 1,
    contextBrowserSessions: SERVES,
    contextBrowserIdleSeconds: IDLE_SECONDS,
    // One shared browser an account: ContextStandby.test.ts has the standby.
    contextStandby: false
  }),
  { excludeTestServices: true }
)("context sessions", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  const open = (key: string) =>
    Effect.flatMap(TestService.TestService, (service) =>
      openSession(service.baseUrl, key, { isolation: "context" })
    )

  const connect = (session: { cdp_url: string }, key: string) =>
    Effect.acquireRelease(
      Effect.promise(() =>
        puppeteer.connect({
          browserWSEndpoint: session.cdp_url,
          headers: { Authorization: `Bearer ${key}` },
          defaultViewport: null
        })
      ),
      (browser: Browser) => Effect.promise(() => browser.disconnect().catch(() => undefined))
    )

  /** A value of `/metrics`. */
  const metric = (name: string) =>
    Effect.map(api("GET", "/metrics"), (metrics) => metricValue(metrics.text, name))
  /** The node's shared browsers for context sessions now. */
  const sharedBrowsers = metric("rbs_context_browsers")
  /** Shared browsers started so far (other tests' accounts' may close meanwhile, idle: this only grows). */
  const startedTotal = metric("rbs_context_browsers_started_total")

  it.effect(
    "starts as a context, opens with one blank page, works with puppeteer through its own egress proxy, and ends metered and billed",
    () =>
      Effect.gen(function* () {
        const { key } = yield* signUp((yield* TestService.TestService).baseUrl)
        const page = yield* LocalPage.serve
        const session = yield* open(key)
        assert.strictEqual(session.isolation, "context")
        assert.strictEqual(session.session_type, "browser")
        assert.match(session.device, /^Chromium \d+ headless, 1280x720$/)
        const browser = yield* connect(session, key)
        const pages = yield* Effect.promise(() => browser.pages())
        assert.lengthOf(pages, 1)
        assert.strictEqual(pages[0]!.url(), "about:blank")
        yield* Effect.promise(() => pages[0]!.goto(`${page}?title=in-a-context`))
        assert.strictEqual(yield* Effect.promise(() => pages[0]!.title()), "in-a-context")
        const viewport = yield* Effect.promise(() =>
          pages[0]!.evaluate("[window.innerWidth, window.innerHeight]")
        )
        assert.deepStrictEqual(viewport, [1280, 720])
        const shot = yield* api("POST", `/v1/sessions/${session.id}/screenshot`, { key })
        assert.strictEqual(shot.status, 200)
        assert.deepStrictEqual([...shot.bytes.subarray(0, 8)], PNG_SIGNATURE)
        yield* Effect.promise(() => browser.disconnect())
        const deleted = yield* api("DELETE", `/v1/sessions/${session.id}`, { key })
        assert.strictEqual(deleted.status, 204)
        const ended = yield* api("GET", `/v1/sessions/${session.id}`, { key })
        assert.strictEqual(ended.json.status, "closed")
        assert.isAbove(ended.json.bytes_down, 0, "the page came through the context's own proxy, metered")
        const summary = yield* api("GET", "/v1/billing/summary", { key })
        assert.isBelow(
          summary.json.balance_micro_usd,
          5_000_000,
          "the session was billed from the signup credit"
        )
      }).pipe(Effect.scoped),
    60_000
  )

  it.effect(
    "the account's next context session shares the browser, and finds nothing of the last one's cookies, storage or cache",
    () =>
      Effect.gen(function* () {
        const { key } = yield* signUp((yield* TestService.TestService).baseUrl)
        const page = yield* LocalPage.serve
        const first = yield* open(key)
        const before = yield* startedTotal
        yield* Effect.scoped(
          Effect.gen(function* () {
            const browser = yield* connect(first, key)
            const [tab] = yield* Effect.promise(() => browser.pages())
            yield* Effect.promise(() => tab!.goto(`${page}?title=first`))
            yield* Effect.promise(() =>
              tab!.evaluate(`(async () => {
                document.cookie = "who=first; max-age=3600"
                localStorage.setItem("who", "first")
                const cache = await caches.open("kept")
                await cache.put("/cached", new Response("first"))
              })()`)
            )
            assert.strictEqual(yield* Effect.promise(() => tab!.evaluate("document.cookie")), "who=first")
          })
        )
        assert.strictEqual((yield* api("DELETE", `/v1/sessions/${first.id}`, { key })).status, 204)

        const second = yield* open(key)
        assert.strictEqual(yield* startedTotal, before, "the same shared browser serves the next session")
        const browser = yield* connect(second, key)
        const [tab] = yield* Effect.promise(() => browser.pages())
        yield* Effect.promise(() => tab!.goto(`${page}?title=second`))
        const left = yield* Effect.promise(() =>
          tab!.evaluate(`(async () => [document.cookie, localStorage.getItem("who"), await caches.keys()])()`)
        )
        assert.deepStrictEqual(left, ["", null, []])
        assert.strictEqual((yield* api("DELETE", `/v1/sessions/${second.id}`, { key })).status, 204)
      }).pipe(Effect.scoped),
    60_000
  )

  it.effect(
    "two open context sessions of one account each see only their own pages, in playwright and puppeteer; another account gets another browser",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const page = yield* LocalPage.serve
        const a = yield* open(key)
        const b = yield* open(key)
        const viaPlaywright = yield* Effect.acquireRelease(
          Effect.promise(() =>
            chromium.connectOverCDP(a.cdp_url, { headers: { Authorization: `Bearer ${key}` } })
          ),
          (browser) => Effect.promise(() => browser.close().catch(() => undefined))
        )
        assert.lengthOf(viaPlaywright.contexts(), 1)
        const context = viaPlaywright.contexts()[0]!
        assert.lengthOf(context.pages(), 1)
        yield* Effect.promise(() => context.pages()[0]!.goto(`${page}?title=session-a`))
        const extra = yield* Effect.promise(() => context.newPage())
        yield* Effect.promise(() => extra.goto(`${page}?title=session-a-2`))

        const viaPuppeteer = yield* connect(b, key)
        const pagesOfB = yield* Effect.promise(() => viaPuppeteer.pages())
        assert.lengthOf(pagesOfB, 1, "b sees none of a's pages")
        assert.strictEqual(pagesOfB[0]!.url(), "about:blank")
        const refused = yield* Effect.promise(async () => {
          const cdp = await viaPuppeteer.target().createCDPSession()
          return cdp.send("SystemInfo.getProcessInfo").then(
            () => "answered",
            (error: Error) => error.message
          )
        })
        assert.match(refused, /beyond this session's browser context/)
        assert.lengthOf(context.pages(), 2, "a sees none of b's")

        const shared = yield* startedTotal
        const other = yield* signUp(service.baseUrl)
        const c = yield* open(other.key)
        assert.strictEqual(yield* startedTotal, shared + 1, "another account never shares a browser")
        for (const [id, owner] of [
          [a.id, key],
          [b.id, key],
          [c.id, other.key]
        ] as const)
          assert.strictEqual((yield* api("DELETE", `/v1/sessions/${id}`, { key: owner })).status, 204)
      }).pipe(Effect.scoped),
    90_000
  )

  it.effect(
    "playwright's frame, network, input and download workloads run unchanged in a context session",
    () =>
      Effect.gen(function* () {
        const { key } = yield* signUp((yield* TestService.TestService).baseUrl)
        const page = yield* LocalPage.serve
        const session = yield* open(key)
        const browser = yield* Effect.acquireRelease(
          Effect.promise(() =>
            chromium.connectOverCDP(session.cdp_url, { headers: { Authorization: `Bearer ${key}` } })
          ),
          (client) => Effect.promise(() => client.close().catch(() => undefined))
        )
        const tab = browser.contexts()[0]!.pages()[0]!
        // A frame of another site (localhost against 127.0.0.1): its own renderer, a child target.
        const inner = page.replace("127.0.0.1", "localhost")
        yield* Effect.promise(() =>
          tab.setContent(`<h1>outer</h1><iframe src="${inner}?title=inner-frame"></iframe>`)
        )
        const frame = yield* Effect.promise(async () => {
          const deadline = Date.now() + 10_000
          while (Date.now() < deadline) {
            const found = tab.frames().find((f) => f.url().includes("inner-frame"))
            if (found !== undefined) {
              await found.waitForLoadState()
              return found
            }
            await new Promise((resolve) => setTimeout(resolve, 50))
          }
          throw new Error("the frame never attached")
        })
        assert.strictEqual(yield* Effect.promise(() => frame.textContent("h1")), "inner-frame")
        // Network: a request the client answers itself.
        yield* Effect.promise(() =>
          tab.route("**/answered-by-the-client", (route) =>
            route.fulfill({ contentType: "text/html", body: "<title>routed</title><p>from the client</p>" })
          )
        )
        yield* Effect.promise(() => tab.goto(`${page}answered-by-the-client`))
        assert.strictEqual(yield* Effect.promise(() => tab.textContent("p")), "from the client")
        // Input: clicks and keys.
        yield* Effect.promise(() => tab.goto(`${page}counter`))
        yield* Effect.promise(() => tab.click("#button"))
        yield* Effect.promise(() => tab.click("#button"))
        assert.strictEqual(yield* Effect.promise(() => tab.textContent("#count")), "2")
        yield* Effect.promise(() => tab.fill("#field", "typed"))
        assert.strictEqual(yield* Effect.promise(() => tab.inputValue("#field")), "typed")
        // A download: the client hears of it, and the session's downloads list it.
        const [download] = yield* Effect.promise(() =>
          Promise.all([
            tab.waitForEvent("download"),
            tab.evaluate(`(() => {
              const link = document.createElement("a")
              link.href = URL.createObjectURL(new Blob(["from a context"]))
              link.download = "context.txt"
              document.body.append(link)
              link.click()
            })()`)
          ])
        )
        assert.strictEqual(download.suggestedFilename(), "context.txt")
        // Playwright asks for `allowAndName`: Chromium names the file by the download's guid.
        const deadline = Date.now() + 10_000
        while (true) {
          const list = yield* api("GET", `/v1/sessions/${session.id}/downloads`, { key })
          if (list.json.data?.some((file: { size: number }) => file.size === "from a context".length)) break
          assert.isBelow(Date.now(), deadline, "the download is in the session's own folder")
          yield* Effect.sleep("100 millis")
        }
        assert.strictEqual((yield* api("DELETE", `/v1/sessions/${session.id}`, { key })).status, 204)
      }).pipe(Effect.scoped),
    60_000
  )

  it.effect("isolation is a browser's: a context sandbox or an unknown isolation is 400", () =>
    Effect.gen(function* () {
      const { key } = yield* signUp((yield* TestService.TestService).baseUrl)
      const sandbox = yield* api("POST", "/v1/sessions", {
        key,
        body: { session_type: "sandbox", isolation: "context" }
      })
      assert.strictEqual(sandbox.status, 400)
      assert.strictEqual(sandbox.json.error.code, "invalid_field")
      assert.match(sandbox.json.error.message, /isolation/)
      const unknown = yield* api("POST", "/v1/sessions", { key, body: { isolation: "vm" } })
      assert.strictEqual(unknown.status, 400)
      assert.match(unknown.json.error.message, /isolation/)
    })
  )

  it.effect(
    "a shared browser is recycled after CONTEXT_BROWSER_SESSIONS, and closes CONTEXT_BROWSER_IDLE_SECONDS after the account's last session",
    () =>
      Effect.gen(function* () {
        const { key } = yield* signUp((yield* TestService.TestService).baseUrl)
        const started = yield* startedTotal
        const end = (id: string) => Effect.map(api("DELETE", `/v1/sessions/${id}`, { key }), (r) => r.status)
        // SERVES sessions, one after another, in one browser; the next one in a new one.
        for (let i = 0; i < SERVES; i++) {
          const session = yield* open(key)
          assert.strictEqual(yield* startedTotal, started + 1, `session ${i + 1} in the same browser`)
          assert.strictEqual(yield* end(session.id), 204)
        }
        const next = yield* open(key)
        assert.strictEqual(yield* startedTotal, started + 2, "a new browser after the recycled one")
        assert.strictEqual(yield* end(next.id), 204)
        // Idle: kept a while for the next session, then gone within the idle time and the 1 s check
        // (as are the other accounts' of this file by then).
        assert.isAtLeast(yield* sharedBrowsers, 1, "kept for the next session a while")
        const deadline = Date.now() + (IDLE_SECONDS + 3) * 1000
        while ((yield* sharedBrowsers) !== 0) {
          assert.isBelow(Date.now(), deadline, "closed after its idle time")
          yield* Effect.sleep("200 millis")
        }
      }),
    60_000
  )
})

// CONTEXT_BROWSER_MEMORY_MB: a shared browser past it takes no new session (a browser holds far more than 1 MB).
layer(TestService.layer({ browserPoolSize: 1, contextBrowserMemoryMb: 1, contextStandby: false }), {
  excludeTestServices: true
})("context sessions: memory", (it) => {
  it.effect(
    "a shared browser past CONTEXT_BROWSER_MEMORY_MB is recycled once its session ends",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const startedTotal = Effect.map(request(service.baseUrl, "GET", "/metrics"), (metrics) =>
          metricValue(metrics.text, "rbs_context_browsers_started_total")
        )
        const first = yield* openSession(service.baseUrl, key, { isolation: "context" })
        const started = yield* startedTotal
        assert.strictEqual(
          (yield* request(service.baseUrl, "DELETE", `/v1/sessions/${first.id}`, { key })).status,
          204
        )
        // Its memory is read after the session ends, off the session's path.
        const deadline = Date.now() + 10_000
        let next = yield* openSession(service.baseUrl, key, { isolation: "context" })
        while ((yield* startedTotal) === started) {
          assert.isBelow(Date.now(), deadline, "a new browser after the one past its memory")
          yield* request(service.baseUrl, "DELETE", `/v1/sessions/${next.id}`, { key })
          yield* Effect.sleep("200 millis")
          next = yield* openSession(service.baseUrl, key, { isolation: "context" })
        }
        assert.strictEqual(yield* startedTotal, started + 1)
        assert.strictEqual(
          (yield* request(service.baseUrl, "DELETE", `/v1/sessions/${next.id}`, { key })).status,
          204
        )
      }),
    60_000
  )
})
