import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import puppeteer from "puppeteer-core"
import { metricValue, openSession, request, signUp } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"

// CONTEXT_STANDBY (the default): an account whose context sessions follow each
// other gets a second shared browser, and the next context is made there
// while a session starts in the first.

layer(TestService.layer({ browserPoolSize: 1, contextBrowserIdleSeconds: 3 }), {
  excludeTestServices: true
})("context sessions: the standby browser", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  /** A value of `/metrics`. */
  const metric = (name: string) =>
    Effect.map(api("GET", "/metrics"), (metrics) => metricValue(metrics.text, name))

  const open = (key: string) =>
    Effect.flatMap(TestService.TestService, (service) =>
      openSession(service.baseUrl, key, { isolation: "context" })
    )

  /** Connects, loads `url` in the first page, and answers what the page says of itself. */
  const use = (session: { cdp_url: string }, key: string, url: string) =>
    Effect.promise(async () => {
      const browser = await puppeteer.connect({
        browserWSEndpoint: session.cdp_url,
        headers: { Authorization: `Bearer ${key}` },
        defaultViewport: null
      })
      try {
        const pages = await browser.pages()
        await pages[0]!.goto(url)
        return {
          pages: pages.length,
          size: await pages[0]!.evaluate("[innerWidth, innerHeight]"),
          cookie: await pages[0]!.evaluate("document.cookie"),
          set: await pages[0]!.evaluate(`document.cookie = "n=1; max-age=60"`)
        }
      } finally {
        await browser.disconnect()
      }
    })

  const waitFor = <A>(read: Effect.Effect<A, never, any>, ok: (a: A) => boolean, what: string) =>
    Effect.gen(function* () {
      const deadline = Date.now() + 20_000
      while (true) {
        const value = yield* read
        if (ok(value)) return value
        assert.isBelow(Date.now(), deadline, what)
        yield* Effect.sleep("100 millis")
      }
    })

  it.effect(
    "sessions that follow each other get a standby browser; each opens sized, with nothing of the last; it closes idle",
    () =>
      Effect.gen(function* () {
        const { key } = yield* signUp((yield* TestService.TestService).baseUrl)
        const page = yield* LocalPage.serve
        const started = yield* metric("rbs_context_browsers_started_total")

        // One session alone: one shared browser.
        const first = yield* open(key)
        const seen = [yield* use(first, key, page)]
        assert.strictEqual(yield* metric("rbs_context_browsers_started_total"), started + 1)
        assert.strictEqual((yield* api("DELETE", `/v1/sessions/${first.id}`, { key })).status, 204)

        // The next ones right after: the standby starts (once the pool has a warm browser to give),
        // and the next contexts are made in it.
        for (let i = 0; i < 6; i++) {
          const session = yield* open(key)
          seen.push(yield* use(session, key, page))
          assert.strictEqual((yield* api("DELETE", `/v1/sessions/${session.id}`, { key })).status, 204)
        }
        yield* waitFor(
          metric("rbs_context_browsers_started_total"),
          (n) => n === started + 2,
          "a standby browser starts for sessions that follow each other"
        )
        assert.strictEqual(
          yield* metric("rbs_context_browsers_started_total"),
          started + 2,
          "one standby, no more"
        )
        assert.strictEqual(yield* metric("rbs_context_browsers"), 2)
        for (const s of seen) {
          assert.strictEqual(s.pages, 1, "one blank page, as a launched Chromium has")
          assert.deepStrictEqual(s.size, [1280, 720], "a context's window has the session's viewport")
          assert.strictEqual(s.cookie, "", "nothing of the last session's")
        }

        // Both close once idle.
        yield* waitFor(metric("rbs_context_browsers"), (n) => n === 0, "the shared browsers close idle")
      }).pipe(Effect.scoped),
    90_000
  )
})
