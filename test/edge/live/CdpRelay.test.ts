import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { chromium } from "playwright-core"
import puppeteer from "puppeteer-core"
import WebSocket from "ws"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { cdpCall, refusesBinaryFrames, orderAndLargeFrames, rawConnect } from "../../support/CdpChecks.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"

/** Listens for the close frame now, so a close that comes before the await is not missed. */
const closeOf = (socket: WebSocket) => {
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.once("close", (code, reason) => resolve({ code, reason: reason.toString() }))
  )
  return Effect.promise(() => closed)
}

layer(TestService.layer({ browserPoolSize: 1 }), { excludeTestServices: true })("CDP relay", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  const setup = Effect.gen(function* () {
    const service = yield* TestService.TestService
    const account = yield* signUp(service.baseUrl)
    const created = yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
    const session = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
    return { service, account, session }
  })

  it.effect("puppeteer connects with a Bearer header, navigates a local page, and counts as a lease", () =>
    Effect.gen(function* () {
      const { account, session } = yield* setup
      const page = yield* LocalPage.serve
      const browser = yield* Effect.promise(() =>
        puppeteer.connect({
          browserWSEndpoint: session.cdp_url,
          headers: { Authorization: `Bearer ${account.key}` },
          defaultViewport: null
        })
      )
      const tab = yield* Effect.promise(() => browser.newPage())
      yield* Effect.promise(() => tab.goto(`${page}?title=hello-puppeteer`))
      assert.strictEqual(yield* Effect.promise(() => tab.title()), "hello-puppeteer")
      const shot = yield* Effect.promise(() => tab.screenshot())
      assert.isAbove(shot.length, 1000)
      const leases = yield* api("GET", `/v1/sessions/${session.id}`, { key: account.key })
      assert.strictEqual(leases.json.active_connection_leases, 1)
      yield* Effect.promise(() => browser.disconnect())
      const service = yield* TestService.TestService
      const after = yield* waitForSession(
        service.baseUrl,
        account.key,
        session.id,
        (s) => s.active_connection_leases === 0,
        5_000
      )
      assert.strictEqual(after.status, "ready")
    })
  )

  it.effect("playwright connects over CDP with headers and drives a page", () =>
    Effect.gen(function* () {
      const { account, session } = yield* setup
      const page = yield* LocalPage.serve
      const browser = yield* Effect.promise(() =>
        chromium.connectOverCDP(session.cdp_url, { headers: { Authorization: `Bearer ${account.key}` } })
      )
      const context = browser.contexts()[0]!
      const tab = yield* Effect.promise(() => context.newPage())
      yield* Effect.promise(() => tab.goto(`${page}?title=hello-playwright`))
      assert.strictEqual(yield* Effect.promise(() => tab.title()), "hello-playwright")
      const text = yield* Effect.promise(() => tab.locator("h1").textContent())
      assert.strictEqual(text, "hello-playwright")
      yield* Effect.promise(() => browser.close())
      const still = yield* api("GET", `/v1/sessions/${session.id}`, { key: account.key })
      assert.strictEqual(still.json.status, "ready", "a client disconnect does not end the session")
    })
  )

  it.effect("accepts the key as ?token= for clients that cannot set headers", () =>
    Effect.gen(function* () {
      const { account, session } = yield* setup
      const browser = yield* Effect.promise(() =>
        puppeteer.connect({ browserWSEndpoint: `${session.cdp_url}?token=${account.key}` })
      )
      const version = yield* Effect.promise(() => browser.version())
      assert.match(version, /Chrome\/\d+/)
      yield* Effect.promise(() => browser.disconnect())
    })
  )

  it.effect(
    "refuses before upgrading: 401 without a valid key, 404 for unknown or foreign, 409 once closed",
    () =>
      Effect.gen(function* () {
        const { service, account, session } = yield* setup
        const other = yield* signUp(service.baseUrl)
        const noKey = yield* rawConnect(session.cdp_url)
        assert.strictEqual(noKey.status, 401)
        assert.deepStrictEqual(JSON.parse(noKey.body), {
          error: { code: "unauthorized", message: "Missing or invalid API key." }
        })
        const badKey = yield* rawConnect(session.cdp_url, { authorization: "Bearer svc_live_nope" })
        assert.strictEqual(badKey.status, 401)
        const unknown = yield* rawConnect(
          `${service.wsBase}/sessions/sess_00000000-0000-0000-0000-000000000000`,
          {
            authorization: `Bearer ${account.key}`
          }
        )
        assert.strictEqual(unknown.status, 404)
        assert.strictEqual(JSON.parse(unknown.body).error.code, "session_not_found")
        const foreign = yield* rawConnect(session.cdp_url, { authorization: `Bearer ${other.key}` })
        assert.strictEqual(foreign.status, 404)

        yield* api("DELETE", `/v1/sessions/${session.id}`, { key: account.key })
        const closed = yield* rawConnect(session.cdp_url, { authorization: `Bearer ${account.key}` })
        assert.strictEqual(closed.status, 409)
        assert.strictEqual(JSON.parse(closed.body).error.code, "session_not_open")
      })
  )

  it.effect("sends the client a close frame with the reason when the session ends", () =>
    Effect.gen(function* () {
      const { account, session } = yield* setup
      const connected = yield* rawConnect(session.cdp_url, { authorization: `Bearer ${account.key}` })
      assert.strictEqual(connected.status, 101)
      const socket = connected.socket!
      const version = yield* cdpCall(socket, 1, "Browser.getVersion")
      assert.match(version.result.product, /Chrome/)
      const closed = closeOf(socket)
      assert.strictEqual(
        (yield* api("DELETE", `/v1/sessions/${session.id}`, { key: account.key })).status,
        204
      )
      const frame = yield* closed
      assert.strictEqual(frame.code, 1000)
      assert.strictEqual(frame.reason, "session ended: client_delete")
    })
  )

  it.effect("answers Browser.close without killing the session's browser", () =>
    Effect.gen(function* () {
      const { account, session } = yield* setup
      const browser = yield* Effect.promise(() =>
        puppeteer.connect({
          browserWSEndpoint: session.cdp_url,
          headers: { Authorization: `Bearer ${account.key}` }
        })
      )
      yield* Effect.promise(() => browser.close())
      const after = yield* api("GET", `/v1/sessions/${session.id}`, { key: account.key })
      assert.strictEqual(after.json.status, "ready")
      const again = yield* Effect.promise(() =>
        puppeteer.connect({
          browserWSEndpoint: session.cdp_url,
          headers: { Authorization: `Bearer ${account.key}` }
        })
      )
      assert.match(yield* Effect.promise(() => again.version()), /Chrome/)
      yield* Effect.promise(() => again.disconnect())
    })
  )

  it.effect(
    "keeps each event before the answer it belongs to with a thousand commands in flight, and passes 20 MB frames both ways",
    () =>
      Effect.gen(function* () {
        const { account, session } = yield* setup
        yield* orderAndLargeFrames(session.cdp_url, account.key)
      })
  )

  it.effect("the screenshot route still answers after clients opened tabs and left", () =>
    Effect.gen(function* () {
      const { account, session } = yield* setup
      const page = yield* LocalPage.serve
      const headers = { Authorization: `Bearer ${account.key}` }
      const browser = yield* Effect.promise(() =>
        puppeteer.connect({ browserWSEndpoint: session.cdp_url, headers, defaultViewport: null })
      )
      const tab = yield* Effect.promise(() => browser.newPage())
      yield* Effect.promise(() => tab.goto(`${page}?title=second-tab`))
      yield* Effect.promise(() => browser.disconnect())
      const played = yield* Effect.promise(() => chromium.connectOverCDP(session.cdp_url, { headers }))
      yield* Effect.promise(() => played.contexts()[0]!.newPage())
      yield* Effect.promise(() => played.close())
      const started = Date.now()
      const shot = yield* api("POST", `/v1/sessions/${session.id}/screenshot`, { key: account.key })
      assert.strictEqual(shot.status, 200)
      assert.isBelow(Date.now() - started, 10_000)
    })
  )

  it.effect(
    "the screenshot is of the tab in front, whichever tab that is (a tab behind renders nothing)",
    () =>
      Effect.gen(function* () {
        const { account, session } = yield* setup
        const headers = { Authorization: `Bearer ${account.key}` }
        const browser = yield* Effect.promise(() =>
          puppeteer.connect({ browserWSEndpoint: session.cdp_url, headers, defaultViewport: null })
        )
        const colours = ["rgb(200, 0, 0)", "rgb(0, 0, 200)", "rgb(0, 160, 0)"]
        const tabs = yield* Effect.forEach(colours, (colour) =>
          Effect.promise(async () => {
            const tab = await browser.newPage()
            await tab.setContent(`<body style="background: ${colour}"></body>`)
            return tab
          })
        )
        const shots = new Set<string>()
        for (const tab of [tabs[0]!, tabs[2]!, tabs[1]!]) {
          yield* Effect.promise(() => tab.bringToFront())
          const shot = yield* api("POST", `/v1/sessions/${session.id}/screenshot`, { key: account.key })
          assert.strictEqual(shot.status, 200)
          shots.add(Buffer.from(shot.bytes).toString("base64"))
        }
        assert.strictEqual(shots.size, 3, "three tabs in front in turn: three different pictures")
        yield* Effect.promise(() => browser.disconnect())
      })
  )

  it.effect("refuses binary frames, whatever they hold, and goes on", () =>
    Effect.gen(function* () {
      const { account, session } = yield* setup
      yield* refusesBinaryFrames(session.cdp_url, account.key)
    })
  )
})

layer(TestService.layer({ browserPoolSize: 0 }), { excludeTestServices: true })(
  "CDP relay without a warm pool",
  (it) => {
    it.effect("holds a connect made while creating until the session is ready", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const created = yield* request(service.baseUrl, "POST", "/v1/sessions", {
          key: account.key,
          body: {}
        })
        assert.strictEqual(created.json.status, "creating")
        // With no warm browser the session is still launching Chromium now.
        const shot = yield* request(service.baseUrl, "POST", `/v1/sessions/${created.json.id}/screenshot`, {
          key: account.key
        })
        assert.deepStrictEqual([shot.status, shot.json.error.code], [409, "session_not_ready"])
        const token = yield* request(
          service.baseUrl,
          "POST",
          `/v1/sessions/${created.json.id}/preview-token`,
          {
            key: account.key,
            body: {}
          }
        )
        assert.deepStrictEqual([token.status, token.json.error.code], [409, "session_not_ready"])

        const browser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: created.json.cdp_url,
            headers: { Authorization: `Bearer ${account.key}` }
          })
        )
        const session = yield* request(service.baseUrl, "GET", `/v1/sessions/${created.json.id}`, {
          key: account.key
        })
        assert.strictEqual(session.json.status, "ready")
        assert.match(yield* Effect.promise(() => browser.version()), /Chrome/)
        yield* Effect.promise(() => browser.disconnect())
      })
    )
  }
)
