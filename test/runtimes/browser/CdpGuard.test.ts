import { assert, describe, it } from "@effect/vitest"
import { inspect, isBlockedUrl, MAX_CLIENT_FRAME } from "../../../src/runtimes/browser/CdpGuard.ts"

const context = { downloadsDir: "/srv/session/Downloads", uploadsDir: "/nonexistent/uploads" }

/** The verdict on `message` sent as a text frame (an object is written as JSON first). */
const verdictOn = (message: object | string, binary = false) =>
  inspect(Buffer.from(typeof message === "string" ? message : JSON.stringify(message)), binary, context)

/** What Chromium receives of `message`: the command the guard sends on, or `undefined` when it answers. */
const sent = (message: object | string) => {
  const verdict = verdictOn(message)
  return verdict._tag === "Send" ? verdict.command : undefined
}

/** The guard's answer to `message`, parsed, with why it refused it. */
const answer = (message: object | string, binary = false) => {
  const verdict = verdictOn(message, binary)
  assert.strictEqual(verdict._tag, "Answer", JSON.stringify(message))
  if (verdict._tag !== "Answer") throw new Error("sent on")
  return { ...JSON.parse(verdict.reply), refused: verdict.refused, hangUp: verdict.hangUp }
}

describe("CdpGuard", () => {
  it("sends ordinary commands on as it read them, written anew with nothing but a command's fields", () => {
    for (const message of [
      { id: 1, method: "Page.navigate", params: { url: "https://example.com/" }, sessionId: "S" },
      { id: 2, method: "Runtime.evaluate", params: { expression: "1+1" }, sessionId: "S" },
      { id: 3, method: "Target.createTarget", params: { url: "about:blank" } },
      { id: 4, method: "Target.getTargets" }
    ]) {
      assert.deepStrictEqual(sent(message), message)
    }
    assert.deepStrictEqual(
      sent('{"id":5,"method":"Browser.getVersion","extra":{"anything":1}}'),
      { id: 5, method: "Browser.getVersion" },
      "a field no command has is not passed on"
    )
    // A duplicated key is read once, as JSON.parse does (the last), and reaches Chromium once.
    assert.deepStrictEqual(
      sent(
        '{"id":6,"method":"Target.createTarget","params":{"url":"file:///etc/passwd","url":"about:blank"}}'
      ),
      { id: 6, method: "Target.createTarget", params: { url: "about:blank" } }
    )
    assert.strictEqual(
      answer(
        '{"id":7,"method":"Target.createTarget","params":{"url":"about:blank","url":"file:///etc/passwd"}}'
      ).refused,
      "url"
    )
  })

  it("refuses what it cannot read as JSON text, however Chromium would read it", () => {
    const createTarget = { id: 1, method: "Target.createTarget", params: { url: "file:///etc/passwd" } }
    // Binary frames: JSON or CBOR, Chromium reads both; none passes.
    const binary = answer(createTarget, true)
    assert.strictEqual(binary.refused, "binary")
    assert.strictEqual(binary.error.code, -32700)
    assert.strictEqual(answer('{"id":2,"method":"Browser.getVersion"}', true).refused, "binary")
    const cbor = Buffer.from([0xd8, 0x5a, 0x00, 0x00, 0x00, 0x10, 0xbf, 0x62, 0x69, 0x64, 0x01, 0xff])
    const refused = inspect(cbor, true, context)
    assert.strictEqual(refused._tag === "Answer" && refused.refused, "binary")
    // What Chromium's parser takes and JSON.parse does not: comments, \v, raw control characters.
    for (const frame of [
      `/**/${JSON.stringify(createTarget)}`,
      `${JSON.stringify(createTarget)}// trailing`,
      '{"id":3,"method":"Target.createTarget","params":{"url":"fi\\vle:///etc/passwd"}}',
      '{"id":4,"method":"Target.createTarget","params":{"url":"file:///etc/\u0001passwd"}}',
      '{"id":5,"method":"Target.createTarget",\v"params":{"url":"file:///"}}',
      "not json at all"
    ]) {
      const refusal = answer(frame)
      assert.strictEqual(refusal.refused, "unparsable", JSON.stringify(frame))
      assert.strictEqual(refusal.error.code, -32700)
    }
    for (const frame of [
      "[1,2]",
      '{"id":"1","method":"Browser.getVersion"}',
      '{"id":1.5,"method":"x"}',
      '{"id":1}'
    ]) {
      assert.strictEqual(answer(frame).refused, "malformed", frame)
    }
    assert.strictEqual(
      answer({ id: 9, method: "Page.enable", params: [1], sessionId: "S" }).refused,
      "malformed"
    )
  })

  it("refuses a frame over the limit, answering the command it names first", () => {
    const expression = "x".repeat(MAX_CLIENT_FRAME)
    const refusal = answer({ id: 41, method: "Runtime.evaluate", params: { expression }, sessionId: "S" })
    assert.strictEqual(refusal.refused, "oversized")
    assert.strictEqual(refusal.id, 41)
    assert.match(refusal.error.message, /over the 16777216-byte limit/)
  })

  it("answers Browser.close itself and hangs the client up", () => {
    const verdict = verdictOn({ id: 7, method: "Browser.close" })
    assert.deepStrictEqual(verdict, { _tag: "Answer", reply: '{"id":7,"result":{}}', hangUp: true })
  })

  it("lets a page go nowhere but http, https, ws, wss, data, blob and about:blank, wherever a URL is named", () => {
    const navigation = answer({
      id: 9,
      method: "Page.navigate",
      params: { url: "chrome://settings" },
      sessionId: "ABC"
    })
    assert.deepStrictEqual(navigation, {
      id: 9,
      result: { frameId: "", errorText: "net::ERR_BLOCKED_BY_CLIENT" },
      sessionId: "ABC",
      refused: "url",
      hangUp: false
    })
    for (const [method, params] of [
      ["Target.createTarget", { url: "file:///etc/passwd" }],
      ["Target.createTarget", { url: "about:srcdoc" }],
      ["Target.createTarget", { url: "view-source:https://example.com" }],
      ["Network.loadNetworkResource", { frameId: "F", url: "file:///etc/passwd", options: {} }],
      ["Fetch.continueRequest", { requestId: "R", url: "file:///etc/passwd" }],
      ["Page.navigate", { url: "javascript:alert(1)" }]
    ] as const) {
      const refusal = answer({ id: 10, method, params, sessionId: "S" })
      assert.strictEqual(refusal.refused, "url", `${method} ${params.url}`)
    }
    for (const url of [
      "chrome://version",
      "CHROME://settings",
      " file:///etc/passwd",
      "\u0001file:///etc/passwd",
      "fi\tle:///etc/passwd",
      "ch\nrome://version",
      "devtools://devtools/bundled/inspector.html",
      "chrome-untrusted://terminal",
      "chrome-extension://abc/x.html",
      "filesystem:https://a.b/temporary/x",
      "view-source:file:///etc/passwd",
      "about:settings",
      "about:blankx",
      "javascript:1",
      "example.com",
      "//example.com/x"
    ]) {
      assert.isTrue(isBlockedUrl(url), JSON.stringify(url))
    }
    for (const url of [
      "https://example.com",
      "http://127.0.0.1:8080/x",
      "ws://a.b/c",
      "wss://a.b/c",
      "about:blank",
      "about:blank#top",
      "ABOUT:BLANK",
      "data:text/html,x",
      "blob:https://a.b/0b1c",
      ""
    ]) {
      assert.isFalse(isBlockedUrl(url), JSON.stringify(url))
    }
  })

  it("lets the browser level, and the browser's own domains anywhere, do only what clients need", () => {
    for (const message of [
      { id: 1, method: "Browser.executeBrowserCommand", params: { commandId: "openTabSearch" } },
      { id: 2, method: "Browser.getBrowserCommandLine" },
      { id: 3, method: "Extensions.loadUnpacked", params: { path: "/etc" }, sessionId: "S" },
      { id: 4, method: "PWA.install", params: { manifestId: "x", installUrlOrBundleUrl: "https://a.b" } },
      { id: 5, method: "Target.openDevTools", params: { targetId: "T" } },
      { id: 6, method: "Page.navigate", params: { url: "https://example.com" } },
      {
        id: 7,
        method: "Target.setRemoteLocations",
        params: { locations: [{ host: "10.0.0.1", port: 9222 }] }
      },
      { id: 8, method: "Target.exposeDevToolsProtocol", params: { targetId: "T" }, sessionId: "S" },
      { id: 9, method: "Browser.crash" }
    ]) {
      const refusal = answer(message)
      assert.strictEqual(refusal.refused, "method", message.method)
      assert.include(refusal.error.message, "Refused by the service", message.method)
      assert.strictEqual(refusal.sessionId, message.sessionId)
    }
    for (const message of [
      { id: 11, method: "Target.setDiscoverTargets", params: { discover: true } },
      {
        id: 12,
        method: "Target.setAutoAttach",
        params: { autoAttach: true, waitForDebuggerOnStart: true, flatten: true }
      },
      { id: 13, method: "Target.attachToBrowserTarget" },
      { id: 14, method: "Target.getBrowserContexts" },
      { id: 15, method: "Browser.getWindowForTarget", params: { targetId: "T" } },
      { id: 16, method: "Storage.getCookies", params: { browserContextId: "C" } },
      { id: 17, method: "Tracing.start", params: { transferMode: "ReturnAsStream" } },
      { id: 18, method: "IO.read", params: { handle: "H" } },
      { id: 19, method: "SystemInfo.getInfo" },
      // In a page's session, its own domains pass.
      { id: 20, method: "Network.enable", params: {}, sessionId: "S" },
      { id: 21, method: "Page.captureScreenshot", params: {}, sessionId: "S" }
    ]) {
      assert.deepStrictEqual(sent(message), message, message.method)
    }
  })

  it("reads a page client's frames without a sessionId as the page's, held to a page session's rules", () => {
    const page = { ...context, pageLevel: true }
    const pageVerdict = (message: object) => inspect(Buffer.from(JSON.stringify(message)), false, page)
    // The page's own domains pass as in a page's session; at the browser level they would not.
    for (const message of [
      { id: 1, method: "Page.navigate", params: { url: "https://example.com" } },
      { id: 2, method: "Runtime.evaluate", params: { expression: "1" } }
    ]) {
      assert.deepStrictEqual(pageVerdict(message), { _tag: "Send", command: message }, message.method)
      assert.strictEqual(verdictOn(message)._tag, "Answer", message.method)
    }
    // The browser's own domains are held to the same list, and every other rule stands.
    for (const message of [
      { id: 3, method: "Browser.getBrowserCommandLine" },
      { id: 4, method: "Target.exposeDevToolsProtocol", params: { targetId: "T" } },
      { id: 5, method: "Page.navigate", params: { url: "file:///etc/passwd" } },
      { id: 6, method: "DOM.setFileInputFiles", params: { files: ["/etc/passwd"], nodeId: 1 } }
    ]) {
      const verdict = pageVerdict(message)
      assert.strictEqual(verdict._tag, "Answer", message.method)
      if (verdict._tag === "Answer") assert.notInclude(verdict.reply, "sessionId", message.method)
    }
  })

  it("refuses a browser context with network settings of its own: its traffic is the session's", () => {
    for (const params of [
      { proxyServer: "http://127.0.0.1:5432" },
      { proxyServer: "direct://" },
      { proxyBypassList: "*" },
      { originsWithUniversalNetworkAccess: ["https://a.b"] }
    ]) {
      const refusal = answer({ id: 3, method: "Target.createBrowserContext", params })
      assert.strictEqual(refusal.refused, "network", JSON.stringify(params))
      assert.match(refusal.error.message, /egress proxy/)
    }
    const plain = { id: 4, method: "Target.createBrowserContext", params: { disposeOnDetach: true } }
    assert.deepStrictEqual(sent(plain), plain, "puppeteer's and playwright's own contexts")
  })

  it("lets a file input take the session's own uploads, by the path the upload answered, and nothing beside them", () => {
    const uploads = "/srv/data/downloads/sess_1-uploads"
    const own = { downloadsDir: "/srv/data/downloads/sess_1", uploadsDir: uploads }
    const given = (files: ReadonlyArray<unknown>) =>
      inspect(
        Buffer.from(
          JSON.stringify({
            id: 9,
            method: "DOM.setFileInputFiles",
            params: { files, nodeId: 1 },
            sessionId: "S"
          })
        ),
        false,
        own
      )
    for (const files of [[`${uploads}/report.pdf`], [`${uploads}/a.txt`, `${uploads}/b b.png`]])
      assert.strictEqual(given(files)._tag, "Send", JSON.stringify(files))
    for (const files of [
      [],
      ["/etc/passwd"],
      [`${uploads}/../sess_2-uploads/x`],
      [`${uploads}/./x`],
      [`${uploads}/sub/x`],
      [`${uploads}/.hidden`],
      [`${uploads}-other/x`],
      [uploads],
      [`${uploads}/`],
      [`${uploads}/ok.txt`, "/etc/passwd"],
      [1]
    ])
      assert.strictEqual(given(files)._tag, "Answer", JSON.stringify(files))
  })

  it("refuses the host's files and the legacy sessions the guard would not see", () => {
    for (const [method, params] of [
      ["DOM.setFileInputFiles", { files: ["/etc/passwd"], nodeId: 1 }],
      ["Page.handleFileChooser", { action: "accept", files: ["/etc/passwd"] }],
      [
        "Input.dispatchDragEvent",
        { type: "drop", x: 1, y: 1, data: { items: [], files: ["/etc/passwd"], dragOperationsMask: 1 } }
      ]
    ] as const) {
      const refusal = answer({ id: 4, method, params, sessionId: "S" })
      assert.strictEqual(refusal.refused, "path", method)
      assert.strictEqual(refusal.error.code, -32000, method)
      assert.strictEqual(refusal.sessionId, "S")
    }
    const drag = {
      id: 5,
      method: "Input.dispatchDragEvent",
      params: {
        type: "dragEnter",
        x: 1,
        y: 1,
        data: { items: [{ mimeType: "text/plain", data: "x" }], dragOperationsMask: 1 }
      },
      sessionId: "S"
    }
    assert.deepStrictEqual(sent(drag), drag)
    for (const message of [
      { id: 6, method: "Target.attachToTarget", params: { targetId: "T" } },
      { id: 7, method: "Target.setAutoAttach", params: { autoAttach: true, waitForDebuggerOnStart: false } },
      { id: 8, method: "Target.sendMessageToTarget", params: { targetId: "T", message: "{}" } }
    ]) {
      assert.strictEqual(answer(message).refused, "unflattened", message.method)
    }
  })

  it("sends downloads to the session's own directory, whatever path the client names", () => {
    for (const method of ["Browser.setDownloadBehavior", "Page.setDownloadBehavior"]) {
      const params = { behavior: "allow", downloadPath: "/root/.ssh", eventsEnabled: true }
      assert.deepStrictEqual(
        sent({ id: 3, method, params, ...(method.startsWith("Page") ? { sessionId: "S" } : {}) })?.params,
        {
          ...params,
          downloadPath: "/srv/session/Downloads"
        }
      )
    }
    assert.deepStrictEqual(
      sent({ id: 4, method: "Browser.setDownloadBehavior", params: { behavior: "deny", downloadPath: "/x" } })
        ?.params,
      {
        behavior: "deny"
      }
    )
    assert.deepStrictEqual(
      sent({ id: 5, method: "Browser.setDownloadBehavior", params: { behavior: "default" } })?.params,
      { behavior: "allow", downloadPath: "/srv/session/Downloads" },
      "back to the default is back to the session's own directory"
    )
  })
})
