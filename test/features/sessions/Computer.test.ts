import { assert, layer } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect } from "effect"
import * as Http from "node:http"
import type * as Net from "node:net"
import puppeteer, { type Page } from "puppeteer-core"
import {
  isReady,
  pngSize,
  request,
  type RequestOptions,
  signUp,
  waitForSession
} from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

// A browser session driven only through `POST /v1/sessions/{id}/computer`, as a computer-use agent
// drives it: a page with a button, a text field, a scrollable list and a slider ends as a person's
// mouse and keyboard would leave it, and every event it saw was the browser's own (trusted).

/**
 * The fixture: a button (100,100 to 300,200) counting clicks, double clicks
 * and context menus; a text field at (100,260); a list (400,100 to 700,300)
 * that scrolls; a slider track (100,400 to 700,440) whose handle follows a
 * held pointer. Every input event's `isTrusted` is kept in `window.untrusted`.
 */
const FIXTURE = `<!doctype html><html><head><title>computer</title></head>
<body style="margin:0;font:16px sans-serif">
<button id="button" style="position:absolute;left:100px;top:100px;width:200px;height:100px">press</button>
<input id="field" style="position:absolute;left:100px;top:260px;width:200px;height:30px">
<div id="list" style="position:absolute;left:400px;top:100px;width:300px;height:200px;overflow:auto">
${Array.from({ length: 100 }, (_, i) => `<div style="height:30px">item ${i}</div>`).join("")}
</div>
<div id="track" style="position:absolute;left:100px;top:400px;width:600px;height:40px;background:#ddd">
<div id="handle" style="position:absolute;left:0;top:0;width:40px;height:40px;background:#333"></div></div>
<script>
window.counts = { click: 0, dblclick: 0, contextmenu: 0 }
window.untrusted = 0
window.keys = []
for (const type of ["click", "dblclick", "contextmenu", "mousedown", "mouseup", "mousemove", "keydown", "keyup", "input", "wheel"])
  document.addEventListener(type, (e) => { if (!e.isTrusted) window.untrusted++ }, true)
button.addEventListener("click", () => counts.click++)
button.addEventListener("dblclick", () => counts.dblclick++)
button.addEventListener("contextmenu", (e) => { e.preventDefault(); counts.contextmenu++ })
document.addEventListener("keydown", (e) => keys.push(e.key + ":" + e.code))
let dragging = false
handle.addEventListener("mousedown", () => { dragging = true })
document.addEventListener("mousemove", (e) => { if (dragging) handle.style.left = Math.max(0, e.clientX - 120) + "px" })
document.addEventListener("mouseup", () => { dragging = false })
</script></body></html>`

const serveFixture = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<Http.Server>((resolve) => {
        const server = Http.createServer((_request, response) => {
          response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
          response.end(FIXTURE)
        })
        server.listen(0, "127.0.0.1", () => resolve(server))
      })
  ),
  (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
).pipe(Effect.map((server) => `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}/`))

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

/** A ready browser session of a new account showing the fixture, and puppeteer on it (to read it only). */
const fixtureSession = Effect.gen(function* () {
  const service = yield* TestService.TestService
  const account = yield* signUp(service.baseUrl)
  const created = yield* api("POST", "/v1/sessions", { key: account.key, body: {} })
  const session = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
  const url = yield* serveFixture
  const browser = yield* Effect.acquireRelease(
    Effect.promise(() =>
      puppeteer.connect({
        browserWSEndpoint: session.cdp_url,
        headers: { Authorization: `Bearer ${account.key}` },
        defaultViewport: null
      })
    ),
    (browser) => Effect.promise(() => browser.disconnect())
  )
  const [page] = yield* Effect.promise(() => browser.pages())
  yield* Effect.promise(() => page!.goto(url))
  return { service, account, id: session.id as string, page: page! }
})

const computer = (id: string, key: string, body: object) =>
  api("POST", `/v1/sessions/${id}/computer`, { key, body })

const read = (page: Page, expression: string) => Effect.promise(() => page.evaluate(expression))

/** Polls the page until `expression` gives `expected` (a scroll lands a frame or two after the wheel). */
const eventually = (page: Page, expression: string, expected: unknown) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 10_000
    while (true) {
      const value = yield* read(page, expression)
      if (JSON.stringify(value) === JSON.stringify(expected)) return
      if (Date.now() > deadline) assert.deepStrictEqual(value, expected, expression)
      yield* Effect.sleep("20 millis")
    }
  })

layer(TestService.layer({ browserPoolSize: 1, limits: { computerCallsPerMinute: 40 } }), {
  excludeTestServices: true
})("computer-use actions", (it) => {
  it.effect("click, type, key chords, scroll and drag leave the page as a person's input would", () =>
    Effect.gen(function* () {
      const { account, id, page } = yield* fixtureSession
      const key = account.key

      const clicked = yield* computer(id, key, {
        actions: [
          { type: "click", x: 200, y: 150 },
          { type: "double_click", x: 200, y: 150 },
          { type: "right_click", x: 150, y: 120 }
        ]
      })
      assert.strictEqual(clicked.status, 200, clicked.text)
      assert.deepStrictEqual(
        clicked.json.results.map((r: any) => [r.type, r.x, r.y]),
        [
          ["click", 200, 150],
          ["double_click", 200, 150],
          ["right_click", 150, 120]
        ]
      )
      assert.deepStrictEqual(clicked.json.cursor, { x: 150, y: 120 })
      assert.isNull(clicked.json.screenshot)
      // A double click is two clicks and a dblclick, as the browser counts a person's.
      yield* eventually(page, "counts", { click: 3, dblclick: 1, contextmenu: 1 })

      const typed = yield* computer(id, key, {
        actions: [
          { type: "click", x: 150, y: 275 },
          { type: "type", text: "hello world" },
          { type: "key", keys: ["ctrl", "a"] },
          { type: "type", text: "Typed" },
          { type: "key", keys: ["Backspace"] },
          { type: "key", keys: ["shift", "Tab"] }
        ]
      })
      assert.strictEqual(typed.status, 200, typed.text)
      assert.strictEqual(yield* read(page, "field.value"), "Type")
      assert.strictEqual(yield* read(page, "document.activeElement.id"), "button", "shift+Tab went back")
      const keys = (yield* read(page, "keys")) as Array<string>
      assert.includeMembers(keys, [
        "h:KeyH",
        "Control:ControlLeft",
        "a:KeyA",
        "Backspace:Backspace",
        "Tab:Tab"
      ])

      const scrolled = yield* computer(id, key, {
        actions: [{ type: "scroll", x: 550, y: 200, scroll_y: 600 }]
      })
      assert.strictEqual(scrolled.status, 200, scrolled.text)
      yield* eventually(page, "list.scrollTop > 0 && document.scrollingElement.scrollTop === 0", true)

      const dragged = yield* computer(id, key, {
        actions: [
          {
            type: "drag",
            path: [
              { x: 120, y: 420 },
              { x: 300, y: 420 },
              { x: 520, y: 420 }
            ]
          },
          { type: "cursor_position" }
        ]
      })
      assert.strictEqual(dragged.status, 200, dragged.text)
      assert.strictEqual(yield* read(page, "handle.style.left"), "400px")
      assert.deepStrictEqual(dragged.json.results[1], { type: "cursor_position", x: 520, y: 420 })
      assert.strictEqual(
        yield* read(page, "window.untrusted"),
        0,
        "every event came from the browser's input"
      )
    })
  )

  it.effect("answers a screenshot of the viewport at the scale asked, and says the scale", () =>
    Effect.gen(function* () {
      const { account, id, page } = yield* fixtureSession
      const viewport = (yield* read(page, "[innerWidth, innerHeight]")) as [number, number]
      const full = yield* computer(id, account.key, {
        actions: [{ type: "move", x: 10, y: 10 }],
        screenshot: true
      })
      assert.strictEqual(full.status, 200, full.text)
      const shot = full.json.screenshot
      assert.strictEqual(shot.mime_type, "image/png")
      const size = pngSize(Buffer.from(shot.data, "base64"))
      assert.deepStrictEqual([size.width, size.height], [shot.width, shot.height])
      assert.deepStrictEqual([full.json.viewport.width, full.json.viewport.height], viewport)
      assert.strictEqual(shot.scale, size.width / viewport[0])

      const half = yield* computer(id, account.key, {
        actions: [{ type: "screenshot" }],
        screenshot_scale: 0.5
      })
      assert.strictEqual(half.status, 200, half.text)
      assert.closeTo(half.json.screenshot.width, viewport[0] / 2, 1)
      assert.closeTo(half.json.screenshot.scale, 0.5, 0.01)
    })
  )

  it.effect("a point off the viewport, an unknown key or too many actions is refused, nothing done", () =>
    Effect.gen(function* () {
      const { account, id, page } = yield* fixtureSession
      const key = account.key
      const off = yield* computer(id, key, {
        actions: [
          { type: "click", x: 200, y: 150 },
          { type: "click", x: 5000, y: 150 }
        ]
      })
      assert.strictEqual(off.status, 422, off.text)
      assert.strictEqual(off.json.error.code, "out_of_viewport")
      assert.match(off.json.error.message, /Action 1 \(click\): \(5000, 150\) is outside the viewport/)
      assert.deepStrictEqual(yield* read(page, "counts.click"), 0, "the first click was not done either")

      const unknownKey = yield* computer(id, key, { actions: [{ type: "key", keys: ["hyper"] }] })
      assert.strictEqual(unknownKey.status, 400, unknownKey.text)
      assert.strictEqual(unknownKey.json.error.code, "invalid_field")

      const many = yield* computer(id, key, {
        actions: Array.from({ length: 21 }, () => ({ type: "cursor_position" }))
      })
      assert.strictEqual(many.status, 400, many.text)
      const twoShots = yield* computer(id, key, { actions: [{ type: "screenshot" }], screenshot: true })
      assert.strictEqual(twoShots.status, 400, twoShots.text)
      assert.deepStrictEqual(twoShots.json.error, {
        code: "invalid_field",
        message: twoShots.json.error.message
      })
      const longWait = yield* computer(id, key, {
        actions: [
          { type: "wait", ms: 10_000 },
          { type: "wait", ms: 10_000 },
          { type: "wait", ms: 1 }
        ]
      })
      assert.strictEqual(longWait.status, 400, longWait.text)

      const stranger = yield* Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))
      const theirs = yield* computer(id, stranger.key, { actions: [{ type: "click", x: 200, y: 150 }] })
      assert.strictEqual(theirs.status, 404, theirs.text)
      const anonymous = yield* api("POST", `/v1/sessions/${id}/computer`, {
        body: { actions: [{ type: "click", x: 200, y: 150 }] }
      })
      assert.strictEqual(anonymous.status, 401, anonymous.text)
      assert.deepStrictEqual(yield* read(page, "counts.click"), 0)
    })
  )

  it.effect("calls are limited per session, with the rate-limit headers", () =>
    Effect.gen(function* () {
      const { account, id } = yield* fixtureSession
      const statuses: Array<number> = []
      let last: any
      for (let i = 0; i < 41; i++) {
        last = yield* computer(id, account.key, { actions: [{ type: "cursor_position" }] })
        statuses.push(last.status)
      }
      assert.deepStrictEqual(statuses.slice(0, 40), Array(40).fill(200))
      assert.strictEqual(statuses[40], 429)
      assert.strictEqual(last.json.error.code, "rate_limited")
      assert.strictEqual(last.headers.get("x-ratelimit-limit"), "40")
      assert.isNotNull(last.headers.get("retry-after"))
    })
  )

  it.effect("the MCP tool drives the page the same way and answers the screen as image content", () =>
    Effect.gen(function* () {
      const { service, account, id, page } = yield* fixtureSession
      const { client } = yield* Effect.acquireRelease(
        Effect.gen(function* () {
          const transport = new StreamableHTTPClientTransport(new URL("/v1/mcp", service.baseUrl), {
            requestInit: { headers: { authorization: `Bearer ${account.key}` } }
          })
          const client = new Client({ name: "rbs-test", version: "1.0.0" })
          yield* Effect.promise(() => client.connect(transport))
          return { client, transport }
        }),
        ({ client }) => Effect.promise(() => client.close())
      )
      const result: any = yield* Effect.promise(() =>
        client.callTool({
          name: "browser_computer",
          arguments: {
            session_id: id,
            actions: [
              { type: "click", x: 150, y: 275 },
              { type: "type", text: "from mcp" },
              { type: "click", x: 200, y: 150 }
            ],
            screenshot: true,
            screenshot_scale: 0.5
          }
        })
      )
      assert.notStrictEqual(result.isError, true, JSON.stringify(result.content))
      assert.strictEqual(yield* read(page, "field.value"), "from mcp")
      yield* eventually(page, "counts.click", 1)
      const image = result.content.find((part: any) => part.type === "image")
      assert.strictEqual(image.mimeType, "image/png")
      assert.strictEqual(
        pngSize(Buffer.from(image.data, "base64")).width,
        result.structuredContent.screenshot.width
      )
      assert.notProperty(result.structuredContent.screenshot, "data", "the image is content, not text")
      assert.deepStrictEqual(result.structuredContent.cursor, { x: 200, y: 150 })

      const off: any = yield* Effect.promise(() =>
        client.callTool({
          name: "browser_computer",
          arguments: { session_id: id, actions: [{ type: "click", x: 9000, y: 1 }] }
        })
      )
      assert.strictEqual(off.isError, true)
      assert.match(JSON.stringify(off.content), /out_of_viewport/)
    })
  )
})
