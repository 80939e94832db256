import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Http from "node:http"
import type * as Net from "node:net"
import puppeteer from "puppeteer-core"
// @ts-expect-error: har-validator ships no types
import * as HarValidator from "har-validator/lib/promise.js"
import { isReady, request, type RequestOptions, signUp, waitForSession } from "../../support/Client.ts"
import { cdpCall, rawConnect } from "../../support/CdpChecks.ts"
import * as Sse from "../../support/Sse.ts"
import * as TestService from "../../support/TestService.ts"
import { SqlClient } from "effect/sql"
import { SessionLogsRepo } from "../../../src/features/logs/SessionLogsRepo.ts"

// A session's log, collected by the service while a real page fetches, logs, throws and navigates,
// read as pages, after the end, and as HAR; no credential the page or its client sent is in it.

const SECRET = "s3cr3t-bearer-value"
const COOKIE = "session-cookie-value"

/**
 * No `/favicon.ico` fetch: the browser's own, which a navigation may cancel after the proxy carried
 * its body and before Chromium read it (bytes billed that no page received, so in no HAR entry).
 */
const NO_FAVICON = `<link rel="icon" href="data:,">`

/** `/logs`: sets a cookie, fetches `/data.json` with a bearer token, logs, throws, then goes to `/next`. */
const pages = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<Http.Server>((resolve) => {
        const server = Http.createServer((req, res) => {
          const path = new URL(req.url ?? "/", "http://x").pathname
          if (path === "/data.json") {
            res.writeHead(200, { "content-type": "application/json" })
            return res.end(JSON.stringify({ items: Array.from({ length: 200 }, (_, i) => i) }))
          }
          if (path === "/logs") {
            res.writeHead(200, { "content-type": "text/html", "set-cookie": `sid=${COOKIE}; Path=/` })
            return res.end(`<!doctype html><title>logs</title>${NO_FAVICON}<script>
              (async () => {
                const r = await fetch("/data.json?token=${SECRET}", { headers: { Authorization: "Bearer ${SECRET}", "X-Big": "b".repeat(10000) } })
                const body = await r.json()
                console.log("fetched", body.items.length, { ok: true })
                setTimeout(() => { throw new Error("boom from the page") }, 0)
                setTimeout(() => { location.href = "/next" }, 50)
              })()
            </script>`)
          }
          res.writeHead(200, { "content-type": "text/html" })
          res.end(`<!doctype html><title>${path}</title>${NO_FAVICON}<p>${path}</p>`)
        })
        server.listen(0, "127.0.0.1", () => resolve(server))
      })
  ),
  (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
).pipe(Effect.map((server) => `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}`))

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const logsOf = (id: string, key: string, query = "") =>
  Effect.map(api("GET", `/v1/sessions/${id}/logs${query}`, { key }), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return response.json
  })

/** Polls the log until `check` holds of its events (they are written every half second). */
const eventually = (id: string, key: string, check: (events: Array<any>) => boolean, query = "?limit=1000") =>
  Effect.gen(function* () {
    const deadline = Date.now() + 15_000
    while (true) {
      const page = yield* logsOf(id, key, query)
      if (check(page.data)) return page
      if (Date.now() > deadline)
        assert.fail(`the log never held it: ${JSON.stringify(page.data.map((e: any) => e.kind))}`)
      yield* Effect.sleep("100 millis")
    }
  })

const openBrowser = (cdpUrl: string, key: string) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      puppeteer.connect({ browserWSEndpoint: cdpUrl, headers: { Authorization: `Bearer ${key}` } })
    ),
    (browser) => Effect.promise(() => browser.disconnect())
  )

layer(TestService.layer({ browserPoolSize: 1 }), { excludeTestServices: true })("session logs", (it) => {
  it.effect(
    "a page's fetch, console, error and navigation are in the log in order, without credentials",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const origin = yield* pages
        const created = yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
        const session = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
        assert.strictEqual(session.logs, true)
        const id = session.id as string
        yield* Effect.scoped(
          Effect.gen(function* () {
            const browser = yield* openBrowser(session.cdp_url, account.key)
            const [page] = yield* Effect.promise(() => browser.pages())
            yield* Effect.promise(() => page!.goto(`${origin}/logs`))
            yield* Effect.promise(() =>
              page!.waitForFunction(`location.pathname === "/next"`, { timeout: 10_000 })
            )
          })
        )

        const live = yield* eventually(id, account.key, (events) =>
          events.some((e) => e.kind === "navigation" && e.data.url.endsWith("/next"))
        )
        const events: Array<any> = live.data
        const index = (predicate: (e: any) => boolean) => events.findIndex(predicate)
        const fetched = index((e) => e.kind === "request" && e.data.url.includes("/data.json"))
        const logged = index((e) => e.kind === "console")
        const thrown = index((e) => e.kind === "page_error")
        const moved = index((e) => e.kind === "navigation" && e.data.url.endsWith("/next"))
        assert.isTrue(
          fetched >= 0 && fetched < logged && logged < thrown && thrown < moved,
          JSON.stringify(events)
        )
        assert.deepStrictEqual(
          events.map((e) => e.id),
          events.map((_, i) => events[0].id + i),
          "ids count up"
        )
        const request = events[fetched].data
        assert.strictEqual(request.method, "GET")
        assert.strictEqual(request.status, 200)
        assert.strictEqual(request.resource_type, "fetch")
        assert.isAbove(request.bytes, 500)
        assert.strictEqual(
          request.request_headers.Authorization ?? request.request_headers.authorization,
          "[redacted]"
        )
        assert.match(request.url, /token=redacted/)
        const big = request.request_headers["X-Big"] ?? request.request_headers["x-big"]
        assert.strictEqual(big.length, 4096, "a long header is kept cut")
        assert.include(events[logged].data, { level: "log", text: "fetched 200 {ok: true}" })
        assert.match(events[thrown].data.message, /boom from the page/)
        assert.isTrue(events.some((e) => e.kind === "client_connected" && e.data.connection === "cdp"))
        const document = events.find((e) => e.kind === "request" && e.data.url === `${origin}/logs`)!.data
        assert.strictEqual(document.resource_type, "document")
        assert.isFalse(live.complete)
        assert.isNotNull(live.next_cursor, "a running session's log goes on")

        // The live stream, from the start, then resumed from the last event it gave: nothing twice, no gap.
        const streamUrl = `${service.baseUrl}/v1/sessions/${id}/logs/stream`
        const head = yield* Sse.read(streamUrl, account.key, { until: (got) => got.length >= 3 })
        assert.strictEqual(head.status, 200)
        assert.strictEqual(head.contentType, "text/event-stream")
        const resumed = yield* Sse.read(streamUrl, account.key, {
          lastEventId: head.events[2]!.id,
          until: (got) => got.some((e) => e.event === "navigation" && e.data.includes("/next"))
        })
        assert.isTrue(resumed.events.length > 0, "the resumed stream goes on where the first left")
        const streamed = [...head.events.slice(0, 3), ...resumed.events].map((e) => JSON.parse(e.data))
        assert.deepStrictEqual(
          streamed.map((e) => e.id),
          events.slice(0, streamed.length).map((e) => e.id)
        )
        assert.deepStrictEqual(
          streamed,
          events.slice(0, streamed.length),
          "the stream gives the list's events"
        )
        const consoleStream = yield* Sse.read(`${streamUrl}?kind=console`, account.key, {
          until: (got) => got.length >= 1
        })
        assert.deepStrictEqual(
          consoleStream.events.map((e) => e.event),
          ["console"]
        )
        // Open while the session ends: it gets the end, then `end`, and closes.
        const tail = Effect.runPromise(
          Sse.read(streamUrl, account.key, { lastEventId: String(events.at(-1).id), timeoutMs: 30_000 })
        )

        // Filtered and paged.
        const consoleOnly = yield* logsOf(id, account.key, "?kind=console,page_error")
        assert.deepStrictEqual(
          consoleOnly.data.map((e: any) => e.kind),
          ["console", "page_error"]
        )
        const first = yield* logsOf(id, account.key, "?limit=2")
        assert.strictEqual(first.data.length, 2)
        assert.isTrue(first.has_more)
        const second = yield* logsOf(id, account.key, `?limit=2&cursor=${first.next_cursor}`)
        assert.strictEqual(second.data[0].id, first.data[1].id + 1)

        // After the end: the end and its reason, the client gone, the log whole.
        assert.strictEqual((yield* api("DELETE", `/v1/sessions/${id}`, { key: account.key })).status, 204)
        const ended = yield* eventually(id, account.key, (all) => all.at(-1)?.kind === "session_ended")
        assert.deepStrictEqual(ended.data.at(-1).data, { reason: "client_delete" })
        assert.isTrue(
          ended.data.some((e: any) => e.kind === "client_disconnected" && e.data.connection === "cdp")
        )
        const whole = yield* Effect.gen(function* () {
          while (true) {
            const page = yield* logsOf(id, account.key, "?limit=1000")
            if (page.complete) return page
            yield* Effect.sleep("100 millis")
          }
        })
        assert.isNull(whole.next_cursor)
        const tailRead = yield* Effect.promise(() => tail)
        assert.isTrue(tailRead.ended, "the stream closes once the log is whole")
        assert.deepStrictEqual(tailRead.events.at(-1), { id: "", event: "end", data: '{"complete":true}' })
        assert.strictEqual(JSON.parse(tailRead.events.at(-2)!.data).kind, "session_ended")

        const all = JSON.stringify(whole)
        assert.notInclude(all, SECRET)
        assert.notInclude(all, COOKIE)
        assert.notInclude(all, account.key)

        // The network part as HAR 1.2, valid by the schema, its bytes the log's.
        const har = yield* api("GET", `/v1/sessions/${id}/har`, { key: account.key })
        assert.strictEqual(har.status, 200, har.text)
        yield* Effect.promise(() => HarValidator.har(har.json))
        assert.notInclude(har.text, SECRET)
        assert.notInclude(har.text, COOKIE)
        const entries: Array<any> = har.json.log.entries
        const data = entries.find((e) => e.request.url.includes("/data.json"))
        assert.strictEqual(data.response.status, 200)
        assert.strictEqual(data.response._transferSize, request.bytes)
        const requests = whole.data.filter((e: any) => e.kind === "request")
        assert.strictEqual(entries.length, requests.length)
        const transferred = entries.reduce((sum, e) => sum + e.response._transferSize, 0)
        const billed = (yield* api("GET", `/v1/sessions/${id}`, { key: account.key })).json
        // Plain HTTP through the metering proxy: what the page received is what the proxy carried down.
        assert.strictEqual(transferred, billed.bytes_down, "every byte down is in the HAR")
      })
  )

  it.effect(
    "the first request of every tab a page opens is in the log, in a browser session and in a context session",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const origin = yield* pages
        const POPUPS = 12
        for (const body of [{}, { isolation: "context" }]) {
          const created = yield* api("POST", "/v1/sessions", { key: account.key, body })
          assert.strictEqual(created.status, 201, created.text)
          const session = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
          const id = session.id as string
          // A client that holds no new tab back (no auto-attach of its own, as puppeteer and playwright
          // have): the page relay of the session's first page, raw.
          const [first] = (yield* api("GET", `/sessions/${id}/json/list`, { key: account.key })).json
          const connected = yield* rawConnect(first.webSocketDebuggerUrl, {
            authorization: `Bearer ${account.key}`
          })
          assert.strictEqual(connected.status, 101, connected.body)
          const socket = connected.socket!
          yield* cdpCall(socket, 1, "Page.navigate", { url: `${origin}/opener` })
          // Loaded: each tab opened below is the page's, from its origin.
          yield* cdpCall(socket, 100, "Runtime.evaluate", {
            expression: `new Promise((done) => document.readyState === "complete" ? done() : addEventListener("load", done))`,
            awaitPromise: true
          })
          // Each opened by the page (one a gesture, as a person's click): its document's request
          // starts as Chromium makes the tab.
          for (let i = 0; i < POPUPS; i++)
            yield* cdpCall(socket, 2 + i, "Runtime.evaluate", {
              expression: `window.open("/popup-${i}")`,
              userGesture: true
            })
          socket.close()
          const wanted = Array.from({ length: POPUPS }, (_, i) => `${origin}/popup-${i}`)
          const found = yield* eventually(id, account.key, (events) =>
            wanted.every((url) => events.some((e) => e.kind === "request" && e.data.url === url))
          )
          const documents = found.data.filter((e: any) => e.kind === "request" && wanted.includes(e.data.url))
          for (const request of documents) {
            assert.strictEqual(request.data.resource_type, "document", JSON.stringify(body))
            assert.strictEqual(request.data.status, 200)
          }
          // Each from its own tab, told as opened by the page.
          const opened = found.data.filter(
            (e: any) => e.kind === "target_created" && e.data.opener_id !== null
          )
          assert.isAtLeast(opened.length, POPUPS, JSON.stringify(body))
          yield* api("DELETE", `/v1/sessions/${id}`, { key: account.key })
        }
      })
  )

  it.effect("logs: false keeps none; another account's log is 404", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const created = yield* api("POST", "/v1/sessions", { key: account.key, body: { logs: false } })
      assert.strictEqual(created.status, 201, created.text)
      const ready = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
      assert.strictEqual(ready.logs, false)
      const page = yield* logsOf(created.json.id, account.key)
      assert.deepStrictEqual(page, {
        object: "list",
        data: [],
        next_cursor: null,
        has_more: false,
        logs: false,
        complete: true
      })
      const stranger = yield* signUp(service.baseUrl)
      const theirs = yield* api("GET", `/v1/sessions/${created.json.id}/logs`, { key: stranger.key })
      assert.strictEqual(theirs.status, 404)
      const none = yield* Sse.read(
        `${service.baseUrl}/v1/sessions/${created.json.id}/logs/stream`,
        account.key,
        {}
      )
      assert.deepStrictEqual(none.events, [{ id: "", event: "end", data: '{"complete":false}' }])
      const theirHar = yield* api("GET", `/v1/sessions/${created.json.id}/har`, { key: stranger.key })
      assert.strictEqual(theirHar.status, 404)
      const huge = yield* api("GET", `/v1/sessions/${created.json.id}/logs?cursor=99999999999`, {
        key: account.key
      })
      assert.strictEqual(huge.status, 400, huge.text)
      assert.strictEqual(huge.json.error.code, "invalid_field")
      const bad = yield* api("GET", `/v1/sessions/${created.json.id}/logs?kind=nonsense`, {
        key: account.key
      })
      assert.strictEqual(bad.status, 400)
      assert.strictEqual(bad.json.error.code, "invalid_field")
      yield* api("DELETE", `/v1/sessions/${created.json.id}`, { key: account.key })
    })
  )

  it.effect(
    "a log is deleted once past its expiry, an incomplete one once stale; its bytes count until then",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ readonly account_id: string }>`
        SELECT account_id FROM api_keys WHERE prefix = ${account.key.slice(0, 12)}`
        const accountId = row!.account_id
        const repo = yield* SessionLogsRepo
        const now = new Date()
        const event = (seq: number) => ({ seq, at: now, kind: "console", data: { text: "x" }, bytes: 100 })
        const day = 86_400_000
        yield* repo.append(
          "sess_expired",
          accountId,
          [event(1), event(2)],
          now,
          new Date(now.getTime() - 1000)
        )
        yield* repo.append("sess_stale", accountId, [event(1)], new Date(now.getTime() - 9 * day))
        yield* repo.append("sess_kept", accountId, [event(1)], now, new Date(now.getTime() + 7 * day))
        yield* repo.append("sess_running", accountId, [event(1)], now)
        assert.strictEqual(yield* repo.usedBytes(accountId), 500)
        const removed = yield* repo.sweep(now, new Date(now.getTime() - 8 * day), 1000)
        assert.strictEqual(removed, 2)
        assert.isUndefined(yield* repo.summary("sess_expired"))
        assert.isUndefined(yield* repo.summary("sess_stale"))
        assert.deepStrictEqual(yield* repo.summary("sess_kept"), { events: 1, complete: true })
        assert.deepStrictEqual(yield* repo.summary("sess_running"), { events: 1, complete: false })
        const [left] = yield* sql<{ readonly n: number }>`
        SELECT count(*)::int AS n FROM session_log_events WHERE session_id IN ('sess_expired', 'sess_stale')`
        assert.strictEqual(left!.n, 0, "their events went with them")
        assert.strictEqual(yield* repo.usedBytes(accountId), 200)
      })
  )
})
