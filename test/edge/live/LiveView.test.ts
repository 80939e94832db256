import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import puppeteer, { type Page } from "puppeteer-core"
import { isReady, request, type RequestOptions, signUp, waitForSession } from "../../support/Client.ts"
import * as LiveViewer from "../../support/LiveViewer.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"
import { tamper } from "../../support/Tamper.ts"

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

/** A ready session of a new account, and that account. */
const readySession = Effect.gen(function* () {
  const service = yield* TestService.TestService
  const account = yield* signUp(service.baseUrl)
  const created = yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
  const session = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
  return { service, account, session }
})

const previewToken = (id: string, key: string) =>
  Effect.gen(function* () {
    const minted = yield* api("POST", `/v1/sessions/${id}/preview-token`, { key, body: {} })
    assert.strictEqual(minted.status, 200, minted.text)
    return minted.json as { url: string; input_enabled: boolean; expires_at: string; fps: number }
  })

/** Puppeteer on the session, showing `path` of a local page server; disconnected with the scope. */
const showPage = (cdpUrl: string, key: string, path: string) =>
  Effect.gen(function* () {
    const pages = yield* LocalPage.serve
    const browser = yield* Effect.acquireRelease(
      Effect.promise(() =>
        puppeteer.connect({
          browserWSEndpoint: cdpUrl,
          headers: { Authorization: `Bearer ${key}` },
          defaultViewport: null
        })
      ),
      (browser) => Effect.promise(() => browser.disconnect())
    )
    const [page] = yield* Effect.promise(() => browser.pages())
    yield* Effect.promise(() => page!.goto(`${pages}${path.slice(1)}`))
    return page!
  })

const read = (page: Page, expression: string) => Effect.promise(() => page.evaluate(expression))

/** Polls the page until `expression` gives `expected` (input lands a few milliseconds after it is sent). */
const eventually = (page: Page, expression: string, expected: unknown) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 10_000
    while (true) {
      const value = yield* read(page, expression)
      if (value === expected) return
      if (Date.now() > deadline) assert.strictEqual(value, expected, expression)
      yield* Effect.sleep("20 millis")
    }
  })

const metric = (text: string, name: string) =>
  Number(new RegExp(`^${name.replace(/[{}"]/g, "\\$&")} (\\d+)`, "m").exec(text)?.[1] ?? 0)

const metrics = Effect.map(api("GET", "/metrics"), (response) => response.text)

layer(TestService.layer({ limits: { viewersPerSession: 5 } }), { excludeTestServices: true })(
  "live view",
  (it) => {
    it.effect("streams JPEG frames, each after a JSON message with its size, time and page", () =>
      Effect.gen(function* () {
        const { account, session } = yield* readySession
        yield* showPage(session.cdp_url, account.key, "/counter")
        const token = yield* previewToken(session.id, account.key)
        assert.strictEqual(token.fps, 5)
        assert.isTrue(token.input_enabled)
        assert.strictEqual(token.url.split("?")[0], session.endpoints.video, "endpoints.video is the stream")
        const viewer = yield* LiveViewer.open(token.url)
        const hello = yield* Effect.promise(() => viewer.hello)
        assert.deepStrictEqual(hello, {
          type: "hello",
          session_id: session.id,
          input_enabled: true,
          fps: 5,
          expires_at: token.expires_at
        })
        const frame = yield* viewer.frame(1)
        assert.deepStrictEqual([frame.jpeg[0], frame.jpeg[1]], [0xff, 0xd8], "a JPEG")
        assert.strictEqual(frame.meta.type, "frame")
        assert.strictEqual(frame.meta.width, 1280)
        assert.strictEqual(frame.meta.height, 720)
        assert.strictEqual(frame.meta.css_width, 1280)
        assert.strictEqual(frame.meta.css_height, 720)
        assert.match(frame.meta.url, /^http:\/\/127\.0\.0\.1:\d+\/counter$/)
        assert.isAtMost(Math.abs(frame.meta.timestamp - Date.now()), 60_000)
        assert.isAbove(frame.meta.seq, 0)
      }).pipe(Effect.scoped)
    )

    it.effect("refuses a missing, tampered, expired-looking or foreign token before upgrading", () =>
      Effect.gen(function* () {
        const first = yield* readySession
        const second = yield* readySession
        const token = yield* previewToken(first.session.id, first.account.key)
        const [base, query] = token.url.split("?token=")
        const unauthorized = {
          error: { code: "unauthorized", message: "Missing, invalid or expired preview token." }
        }
        for (const url of [
          base!,
          `${base}?token=`,
          `${base}?token=${tamper(query!)}`,
          `${base}?token=${query!.split(".")[0]}`,
          // A token for one session does not open another, whoever's it is.
          `${second.service.baseUrl.replace("http", "ws")}/sessions/${second.session.id}/preview?token=${query}`
        ]) {
          const refused = yield* LiveViewer.refusal(url)
          assert.strictEqual(refused.status, 401, url)
          assert.deepStrictEqual(refused.body, unauthorized)
        }
        const plain = yield* Effect.promise(() => fetch(token.url.replace(/^ws/, "http")))
        assert.strictEqual(plain.status, 400, "not an upgrade")
        assert.strictEqual(
          (yield* api("DELETE", `/v1/sessions/${first.session.id}`, { key: first.account.key })).status,
          204
        )
        const ended = yield* LiveViewer.refusal(token.url)
        assert.strictEqual(ended.status, 409)
        assert.strictEqual(ended.body.error.code, "session_not_open")
      })
    )

    it.effect(
      "clicks, taps, keys and scrolls reach the page; a malformed message is answered, the stream stays",
      () =>
        Effect.gen(function* () {
          const { account, session } = yield* readySession
          const page = yield* showPage(session.cdp_url, account.key, "/counter")
          const viewer = yield* LiveViewer.open((yield* previewToken(session.id, account.key)).url)
          yield* viewer.frame(1)
          viewer.send({ type: "click", x: 250, y: 200 })
          yield* eventually(page, "count.textContent", "1")
          viewer.send("not json")
          viewer.send({ type: "click", x: -5, y: 0 })
          viewer.send(Buffer.from("binary"))
          const error = yield* viewer.error(1)
          assert.strictEqual(error.code, "invalid_input")
          assert.match(error.message, /not an input message/)
          yield* viewer.error(2)
          viewer.send({ type: "key", key: "Hyper" })
          assert.deepStrictEqual(yield* viewer.error(4), {
            type: "error",
            code: "invalid_input",
            message: "unknown key: Hyper"
          })
          // Still open, still forwarding.
          viewer.send({ type: "tap", x: 250, y: 200 })
          yield* eventually(page, "touches.textContent + '/' + count.textContent", "1/2")
          viewer.send({ type: "click", x: 200, y: 410 })
          viewer.send({ type: "key", text: "héllo" })
          viewer.send({ type: "key", key: "!" })
          yield* eventually(page, "field.value", "héllo!")
          viewer.send({ type: "key", key: "Backspace" })
          yield* eventually(page, "field.value", "héllo")
          viewer.send({ type: "scroll", x: 600, y: 400, dx: 0, dy: 300 })
          yield* eventually(page, "window.scrollY", 300)
          const text = yield* metrics
          assert.isAtLeast(metric(text, 'rbs_liveview_input_total{result="forwarded"}'), 7)
          assert.isAtLeast(metric(text, 'rbs_liveview_input_total{result="invalid"}'), 3)
        }).pipe(Effect.scoped)
    )

    it.effect(
      "a token minted without sessions.write streams but ignores input, and counts what it ignored",
      () =>
        Effect.gen(function* () {
          const { account, session } = yield* readySession
          const page = yield* showPage(session.cdp_url, account.key, "/counter")
          const readOnly = yield* api("POST", "/v1/keys", {
            cookie: account.cookie,
            body: { name: "viewer", scopes: ["sessions.read"] }
          })
          const token = yield* previewToken(session.id, readOnly.json.secret)
          assert.isFalse(token.input_enabled)
          const viewer = yield* LiveViewer.open(token.url)
          assert.isFalse((yield* Effect.promise(() => viewer.hello)).input_enabled)
          yield* viewer.frame(1)
          const before = metric(yield* metrics, 'rbs_liveview_input_total{result="ignored"}')
          viewer.send({ type: "click", x: 250, y: 200 })
          viewer.send({ type: "key", text: "nope" })
          const deadline = Date.now() + 10_000
          while (metric(yield* metrics, 'rbs_liveview_input_total{result="ignored"}') < before + 2) {
            assert.isBelow(Date.now(), deadline, "the ignored input is counted")
            yield* Effect.sleep("20 millis")
          }
          assert.strictEqual(yield* read(page, "count.textContent"), "0")
          assert.deepStrictEqual(viewer.errors, [])
        }).pipe(Effect.scoped)
    )

    it.effect("five viewers share one screencast and see the same frames; a sixth is refused", () =>
      Effect.gen(function* () {
        const { account, session } = yield* readySession
        const page = yield* showPage(session.cdp_url, account.key, "/counter")
        const viewers = []
        for (let i = 0; i < 5; i++) {
          viewers.push(yield* LiveViewer.open((yield* previewToken(session.id, account.key)).url))
        }
        for (const viewer of viewers) yield* viewer.frame(1)
        const sixth = yield* LiveViewer.refusal((yield* previewToken(session.id, account.key)).url)
        assert.strictEqual(sixth.status, 429)
        assert.deepStrictEqual(sixth.body, {
          error: { code: "viewer_limit", message: "Too many viewers of this session." }
        })
        const text = yield* metrics
        assert.strictEqual(metric(text, "rbs_liveview_screencasts"), 1, "one CDP screencast")
        assert.strictEqual(metric(text, "rbs_liveview_viewers"), 5)
        // A change reaches all five as the same frame of the one screencast.
        yield* Effect.promise(() => page.evaluate("count.textContent = 'changed'"))
        const deadline = Date.now() + 10_000
        while (viewers.some((viewer) => viewer.frames.length < 2)) {
          assert.isBelow(Date.now(), deadline)
          yield* Effect.sleep("20 millis")
        }
        const seqs = viewers.map((viewer) => viewer.frames.at(-1)!.meta.seq)
        assert.strictEqual(new Set(seqs).size, 1, `same frame for all: ${seqs}`)
      }).pipe(
        Effect.scoped,
        // With every viewer gone the screencast stops.
        Effect.andThen(
          Effect.gen(function* () {
            const deadline = Date.now() + 10_000
            while (metric(yield* metrics, "rbs_liveview_screencasts") !== 0) {
              assert.isBelow(Date.now(), deadline, "the screencast stops with its last viewer")
              yield* Effect.sleep("50 millis")
            }
          })
        )
      )
    )

    it.effect("an animated page is sent at no more than 5 frames a second, and keeps streaming", () =>
      Effect.gen(function* () {
        const { account, session } = yield* readySession
        yield* showPage(session.cdp_url, account.key, "/animated")
        const viewer = yield* LiveViewer.open((yield* previewToken(session.id, account.key)).url)
        yield* viewer.frame(2)
        const start = viewer.frames.length
        yield* Effect.sleep("4 seconds")
        const sent = viewer.frames.length - start
        assert.isAtMost(sent, 21, `${sent} frames in 4 s`)
        assert.isAtLeast(sent, 12, `${sent} frames in 4 s: the animation streams`)
        const seqs = viewer.frames.map((frame) => frame.meta.seq)
        assert.deepStrictEqual(
          seqs,
          [...seqs].sort((a, b) => a - b),
          "in order"
        )
      }).pipe(Effect.scoped)
    )

    it.effect("a tab the client opens comes on screen, and when it closes the one left does", () =>
      Effect.gen(function* () {
        const { account, session } = yield* readySession
        const first = yield* showPage(session.cdp_url, account.key, "/counter")
        const viewer = yield* LiveViewer.open((yield* previewToken(session.id, account.key)).url)
        assert.match((yield* viewer.frame(1)).meta.url, /\/counter$/)
        const browser = first.browser()
        const tab = yield* Effect.promise(() => browser.newPage())
        yield* Effect.promise(() => tab.goto(first.url().replace("/counter", "/animated")))
        const onScreen = (pattern: RegExp) =>
          Effect.gen(function* () {
            const deadline = Date.now() + 10_000
            while (!pattern.test(viewer.frames.at(-1)?.meta.url ?? "")) {
              assert.isBelow(Date.now(), deadline, `a frame of ${pattern}`)
              yield* Effect.sleep("20 millis")
            }
          })
        yield* onScreen(/\/animated$/)
        yield* Effect.promise(() => tab.close())
        yield* Effect.promise(() => first.evaluate("count.textContent = '41'"))
        yield* onScreen(/\/counter$/)
        // Input goes to the page on screen.
        viewer.send({ type: "click", x: 250, y: 200 })
        yield* eventually(first, "count.textContent", "42")
      }).pipe(Effect.scoped)
    )

    it.effect("the session's end closes the stream with its reason", () =>
      Effect.gen(function* () {
        const { account, session } = yield* readySession
        const viewer = yield* LiveViewer.open((yield* previewToken(session.id, account.key)).url)
        yield* viewer.frame(1)
        assert.strictEqual(
          (yield* api("DELETE", `/v1/sessions/${session.id}`, { key: account.key })).status,
          204
        )
        const closed = yield* Effect.promise(() => viewer.closed).pipe(Effect.timeout("10 seconds"))
        assert.deepStrictEqual(closed, { code: 1000, reason: "session ended: client_delete" })
        const view = yield* api("GET", `/v1/sessions/${session.id}`, { key: account.key })
        assert.isNull(view.json.endpoints.video, "no stream once ended")
      }).pipe(Effect.scoped)
    )
  }
)

describe("preview token expiry", () => {
  layer(TestService.layer({ previewTokenTtlSeconds: 2 }), { excludeTestServices: true })(
    "short tokens",
    (it) => {
      it.effect("an expired token closes the stream with 4001 and opens nothing; a new token resumes", () =>
        Effect.gen(function* () {
          const { account, session } = yield* readySession
          const token = yield* previewToken(session.id, account.key)
          assert.isAtMost(Date.parse(token.expires_at) - Date.now(), 2_000)
          const viewer = yield* LiveViewer.open(token.url)
          yield* viewer.frame(1)
          const closed = yield* Effect.promise(() => viewer.closed).pipe(Effect.timeout("10 seconds"))
          assert.strictEqual(closed.code, 4001)
          assert.strictEqual(closed.reason, "preview token expired: mint a new one to resume")
          const again = yield* LiveViewer.refusal(token.url)
          assert.strictEqual(again.status, 401)
          const resumed = yield* LiveViewer.open((yield* previewToken(session.id, account.key)).url)
          yield* resumed.frame(1)
        }).pipe(Effect.scoped)
      )
    }
  )
})
