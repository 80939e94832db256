import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { chromium } from "playwright-core"
import puppeteer from "puppeteer-core"
import { metricValue, openSession, request, signUp, waitForSession } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import { until } from "../../support/Poll.ts"
import * as RawCdp from "../../support/RawCdp.ts"
import * as TestService from "../../support/TestService.ts"
import * as TrafficServer from "../../support/TrafficServer.ts"

// A hostile client of a browser session, through the service's relay, with raw frames: what it
// sends must mean to Chromium what the guard read, and nothing it asks for leaves the session's cell
// or its egress proxy. By class: parser differentials, network settings of its own, privileged URLs,
// host paths, the browser level. (The cell itself, with no guard in front, is in Cell.test.ts.)

layer(TestService.layer(), { excludeTestServices: true })("a hostile CDP client", (it) => {
  /** A browser session, a raw connection to it, and a file of the host's it must never read. */
  const session = Effect.gen(function* () {
    const service = yield* TestService.TestService
    const account = yield* signUp(service.baseUrl)
    const opened = yield* openSession(service.baseUrl, account.key)
    const cdp = yield* RawCdp.connect(opened.cdp_url, { authorization: `Bearer ${account.key}` })
    const secret = Path.join(service.config.dataDir, "secrets.json")
    assert.isTrue(Fs.existsSync(secret), "the service's secrets are on this host")
    return { service, account, session: opened, cdp, secret }
  })

  /** The URLs of the browser's targets, asked on a clean frame. */
  const targetUrls = (cdp: RawCdp.RawCdp, id: number) =>
    Effect.map(cdp.call(id, "Target.getTargets"), (answer) =>
      (answer.result?.targetInfos ?? []).map((target: { url: string }) => target.url)
    )

  it.effect("reads a frame once: what Chromium's parser would read otherwise never reaches it", () =>
    Effect.gen(function* () {
      const { cdp, secret } = yield* session
      const createTarget = { id: 1, method: "Target.createTarget", params: { url: `file://${secret}` } }
      const json = JSON.stringify(createTarget)
      const frames: ReadonlyArray<readonly [string | Buffer, boolean]> = [
        // Comments, which Chromium skips and JSON.parse refuses.
        [`/**/${json}`, false],
        [`${json.slice(0, -1)}//}\n}`, false],
        // Escapes and whitespace Chromium reads: \v, and control characters in a string.
        [json.replace('"url":"file:', '"url":"fi\\vle:'), false],
        [`{"id":1,\v"method":"Target.createTarget","params":{"url":"file://${secret}"}}`, false],
        // Binary frames: the same JSON, and CBOR, which Chromium reads from a binary frame.
        [Buffer.from(json), true],
        [RawCdp.cbor({ id: 1, method: "Target.createTarget", params: { url: `file://${secret}` } }), true]
      ]
      for (const [frame, binary] of frames) {
        cdp.send(frame, binary)
        const answer = yield* cdp.answerTo(undefined)
        assert.strictEqual(answer.error?.code, -32700, `${String(frame)}: ${JSON.stringify(answer)}`)
      }
      // A duplicated key means to Chromium what it meant here: the last.
      cdp.send(
        `{"id":2,"method":"Target.createTarget","params":{"url":"file://${secret}","url":"about:blank"}}`
      )
      assert.isString((yield* cdp.answerTo(2)).result?.targetId)
      cdp.send(
        `{"id":3,"method":"Target.createTarget","params":{"url":"about:blank","url":"file://${secret}"}}`
      )
      assert.match((yield* cdp.answerTo(3)).error?.message ?? "", /blocked by the service/)
      const urls = yield* targetUrls(cdp, 4)
      assert.isFalse(
        urls.some((url: string) => url.startsWith("file:")),
        `no file:// target was opened: ${urls}`
      )
      assert.isFalse(cdp.closed(), "the client is answered, not hung up")
    }).pipe(Effect.scoped)
  )

  it.effect("gives no browser context a proxy, a bypass or network access of its own", () =>
    Effect.gen(function* () {
      const { cdp } = yield* session
      const trap = yield* TrafficServer.serve("127.0.0.1")
      for (const [id, params] of [
        [1, { proxyServer: `http://127.0.0.1:${trap.port}` }],
        [2, { proxyServer: "direct://" }],
        [3, { proxyBypassList: "*" }],
        [4, { originsWithUniversalNetworkAccess: ["http://example.com"] }]
      ] as const) {
        const answer = yield* cdp.call(id, "Target.createBrowserContext", params)
        assert.isUndefined(answer.result, JSON.stringify(params))
        assert.match(answer.error.message, /egress proxy/, JSON.stringify(params))
      }
      const contexts = yield* cdp.call(5, "Target.getBrowserContexts")
      assert.deepStrictEqual(contexts.result.browserContextIds, [], "none was made")
      assert.deepStrictEqual(trap.requests(), [])
    }).pipe(Effect.scoped)
  )

  it.effect(
    "sends no page anywhere but http, https, ws, wss, data, blob and about:blank, in any command",
    () =>
      Effect.gen(function* () {
        const { cdp, secret } = yield* session
        const page = (yield* cdp.call(1, "Target.getTargets")).result.targetInfos.find(
          (target: { type: string }) => target.type === "page"
        )
        const attached = yield* cdp.call(2, "Target.attachToTarget", {
          targetId: page.targetId,
          flatten: true
        })
        const sessionId: string = attached.result.sessionId
        const tree = yield* cdp.call(3, "Page.getFrameTree", {}, sessionId)
        const frameId: string = tree.result.frameTree.frame.id
        let id = 10
        for (const [method, params, inSession] of [
          ["Page.navigate", { url: "chrome://version" }, true],
          ["Page.navigate", { url: `view-source:file://${secret}` }, true],
          ["Page.navigate", { url: "about:srcdoc" }, true],
          ["Target.createTarget", { url: "devtools://devtools/bundled/inspector.html" }, false],
          ["Target.createTarget", { url: "chrome-untrusted://terminal/" }, false],
          ["Network.loadNetworkResource", { frameId, url: `file://${secret}`, options: {} }, true],
          ["Fetch.continueRequest", { requestId: "interception-job-1.0", url: `file://${secret}` }, true]
        ] as const) {
          const answer = yield* cdp.call(id++, method, params, inSession ? sessionId : undefined)
          const refused = answer.result?.errorText ?? answer.error?.message ?? ""
          assert.match(refused, /ERR_BLOCKED_BY_CLIENT/, `${method} ${params.url}: ${JSON.stringify(answer)}`)
        }
        const content = yield* cdp.call(
          id++,
          "Runtime.evaluate",
          { expression: "location.href", returnByValue: true },
          sessionId
        )
        assert.strictEqual(content.result.result.value, "about:blank", "the page never left")
      }).pipe(Effect.scoped)
  )

  it.effect(
    "lets no host path in: file inputs, dropped files, download dirs, however the frame is written",
    () =>
      Effect.gen(function* () {
        const { cdp, secret, service, account, session: opened } = yield* session
        const outside = Path.join(service.config.dataDir, "escaped-downloads")
        for (const frame of [
          `/**/{"id":1,"method":"Browser.setDownloadBehavior","params":{"behavior":"allow","downloadPath":"${outside}"}}`,
          `/**/{"id":1,"method":"DOM.setFileInputFiles","params":{"files":["${secret}"],"nodeId":1},"sessionId":"x"}`
        ]) {
          cdp.send(frame)
          assert.strictEqual((yield* cdp.answerTo(undefined)).error?.code, -32700, frame)
        }
        const files = yield* cdp.call(2, "DOM.setFileInputFiles", { files: [secret], nodeId: 1 }, "x")
        assert.match(files.error.message, /a file input takes only the session's own uploads/)
        const drop = yield* cdp.call(
          3,
          "Input.dispatchDragEvent",
          { type: "drop", x: 1, y: 1, data: { items: [], files: [secret], dragOperationsMask: 1 } },
          "x"
        )
        assert.match(drop.error.message, /file paths on the service's host/)
        // A download dir of the client's naming becomes the session's own: a download lands there.
        const behavior = yield* cdp.call(4, "Browser.setDownloadBehavior", {
          behavior: "allow",
          downloadPath: outside
        })
        assert.deepStrictEqual(behavior.result, {})
        const traffic = yield* TrafficServer.serve("127.0.0.1")
        const page = (yield* cdp.call(5, "Target.getTargets")).result.targetInfos.find(
          (target: { type: string }) => target.type === "page"
        )
        const attached = yield* cdp.call(6, "Target.attachToTarget", {
          targetId: page.targetId,
          flatten: true
        })
        yield* cdp.call(
          7,
          "Runtime.evaluate",
          {
            expression: `Object.assign(document.createElement("a"), { href: "${traffic.http}/bytes?n=4096", download: "" }).click()`
          },
          attached.result.sessionId
        )
        const listed = yield* until(
          request(service.baseUrl, "GET", `/v1/sessions/${opened.id}/downloads`, { key: account.key }),
          (answer) => (answer.json?.data ?? []).some((file: { name: string }) => file.name === "bytes")
        )
        assert.strictEqual(listed.json.data[0].size, 4096)
        assert.isFalse(Fs.existsSync(outside), "nothing was written where the client asked")
      }).pipe(Effect.scoped)
  )

  it.effect(
    "lets the browser level do only what clients need; Browser.close, however written, ends nothing",
    () =>
      Effect.gen(function* () {
        const { cdp, account, session: opened, service } = yield* session
        let id = 1
        for (const [method, params] of [
          ["Browser.executeBrowserCommand", { commandId: "openTabSearch" }],
          ["Browser.getBrowserCommandLine", {}],
          ["Target.setRemoteLocations", { locations: [{ host: "127.0.0.1", port: service.config.port! }] }],
          ["Target.openDevTools", { targetId: "x" }],
          ["Extensions.loadUnpacked", { path: service.config.dataDir }],
          ["PWA.install", { manifestId: "https://example.com/", installUrlOrBundleUrl: "file:///" }],
          ["Target.exposeDevToolsProtocol", { targetId: "x" }]
        ] as const) {
          const answer = yield* cdp.call(id++, method, params)
          assert.match(
            answer.error?.message ?? "",
            /Refused by the service/,
            `${method}: ${JSON.stringify(answer)}`
          )
        }
        cdp.send(`/**/{"id":${id},"method":"Browser.close"}`)
        assert.strictEqual((yield* cdp.answerTo(undefined)).error?.code, -32700)
        assert.match((yield* cdp.call(id + 1, "Browser.getVersion")).result.product, /Chrome/)
        const still = yield* request(service.baseUrl, "GET", `/v1/sessions/${opened.id}`, {
          key: account.key
        })
        assert.strictEqual(still.json.status, "ready")
        // Every refusal is counted, by why.
        const metrics = (yield* request(service.baseUrl, "GET", "/metrics")).text
        for (const reason of ["unparsable", "method"])
          assert.isAtLeast(metricValue(metrics, "rbs_cdp_refused_total", `reason="${reason}"`), 1, reason)
      }).pipe(Effect.scoped)
  )

  it.effect(
    "puppeteer's and playwright's own contexts still work, through the session's proxy, metered",
    () =>
      Effect.gen(function* () {
        const { service, account, session: opened } = yield* session
        const traffic = yield* TrafficServer.serve("127.0.0.1")
        const site = yield* LocalPage.serve
        const headers = { Authorization: `Bearer ${account.key}` }
        const browser = yield* Effect.promise(() =>
          puppeteer.connect({ browserWSEndpoint: opened.cdp_url, headers, defaultViewport: null })
        )
        const context = yield* Effect.promise(() => browser.createBrowserContext())
        const tab = yield* Effect.promise(() => context.newPage())
        yield* Effect.promise(() => tab.goto(`${site}?title=in-a-context`))
        assert.strictEqual(yield* Effect.promise(() => tab.title()), "in-a-context")
        const fetched = yield* Effect.promise(() =>
          tab.evaluate(
            (url) => fetch(url).then((response) => response.arrayBuffer().then((body) => body.byteLength)),
            `${traffic.http}/bytes?n=1000000`
          )
        )
        assert.strictEqual(fetched, 1_000_000)
        yield* Effect.promise(() => context.close())
        yield* Effect.promise(() => browser.disconnect())

        const driven = yield* Effect.promise(() => chromium.connectOverCDP(opened.cdp_url, { headers }))
        const own = yield* Effect.promise(() => driven.newContext())
        const page = yield* Effect.promise(() => own.newPage())
        yield* Effect.promise(() => page.goto(`${site}?title=playwright-context`))
        assert.strictEqual(yield* Effect.promise(() => page.title()), "playwright-context")
        yield* Effect.promise(() => own.close())
        yield* Effect.promise(() => driven.close())

        const deleted = yield* request(service.baseUrl, "DELETE", `/v1/sessions/${opened.id}`, {
          key: account.key
        })
        assert.strictEqual(deleted.status, 204)
        const ended = yield* waitForSession(
          service.baseUrl,
          account.key,
          opened.id,
          (s) => s.status === "closed"
        )
        assert.isAtLeast(Number(ended.bytes_down), 1_000_000, "the context's bytes are the session's")
        const wire = yield* until(
          Effect.sync(() => traffic.counts()),
          (counts) => counts.bytesOut >= 1_000_000
        )
        assert.isAtLeast(Number(ended.bytes_down), wire.bytesOut, "every byte it moved is metered")
      }).pipe(Effect.scoped)
  )
})
