import { assert, describe, it } from "@effect/vitest"
import { inspect, isBlockedUrl } from "../../../src/runtimes/browser/CdpGuard.ts"

const context = { downloadsDir: "/srv/session/Downloads" }

describe("CdpGuard", () => {
  it("forwards ordinary commands untouched", () => {
    for (const frame of [
      '{"id":1,"method":"Page.navigate","params":{"url":"https://example.com/"}}',
      '{"id":2,"method":"Runtime.evaluate","params":{"expression":"1+1"}}',
      '{"id":3,"method":"Target.createTarget","params":{"url":"about:blank"}}',
      "not json at all"
    ]) {
      assert.deepStrictEqual(inspect(frame, context), { _tag: "Forward" }, frame)
    }
  })

  it("answers Browser.close itself and hangs the client up", () => {
    const verdict = inspect('{"id":7,"method":"Browser.close"}', context)
    assert.deepStrictEqual(verdict, { _tag: "Answer", reply: '{"id":7,"result":{}}', hangUp: true })
  })

  it("answers navigations to the browser's own pages and files as blocked, keeping the sessionId", () => {
    const verdict = inspect(
      '{"id":9,"method":"Page.navigate","params":{"url":"chrome://settings"},"sessionId":"ABC"}',
      context
    )
    assert.strictEqual(verdict._tag, "Answer")
    if (verdict._tag !== "Answer") return
    assert.isFalse(verdict.hangUp)
    assert.deepStrictEqual(JSON.parse(verdict.reply), {
      id: 9,
      result: { frameId: "", errorText: "net::ERR_BLOCKED_BY_CLIENT" },
      sessionId: "ABC"
    })
    const created = inspect(
      '{"id":10,"method":"Target.createTarget","params":{"url":"file:///etc/passwd"}}',
      context
    )
    assert.strictEqual(created._tag, "Answer")
    if (created._tag === "Answer") assert.strictEqual(JSON.parse(created.reply).error.code, -32000)
  })

  it("sees through escapes, view-source: and the legacy message form", () => {
    const escaped = '{"id":1,"method":"Page.navig\\u0061te","params":{"url":"chrome://version"}}'
    assert.strictEqual(inspect(escaped, context)._tag, "Answer")
    const legacy = JSON.stringify({
      id: 2,
      method: "Target.sendMessageToTarget",
      params: {
        targetId: "T",
        message: JSON.stringify({ id: 1, method: "Page.navigate", params: { url: "devtools://devtools/x" } })
      }
    })
    assert.strictEqual(inspect(legacy, context)._tag, "Answer")
  })

  it("reads schemes as browsers do: control characters, tabs and newlines hide nothing", () => {
    for (const url of [
      "\u0001file:///etc/passwd",
      "fi\tle:///etc/passwd",
      "ch\nrome://version",
      "\u0000 chrome://settings",
      "view-source:\u0001file:///etc/passwd"
    ]) {
      assert.isTrue(isBlockedUrl(url), JSON.stringify(url))
      const frame = JSON.stringify({ id: 1, method: "Page.navigate", params: { url } })
      assert.strictEqual(inspect(frame, context)._tag, "Answer", JSON.stringify(url))
    }
  })

  it("refuses commands that reach the host's files, crash the browser or hand a page CDP", () => {
    for (const [method, params] of [
      ["DOM.setFileInputFiles", { files: ["/etc/passwd"], nodeId: 1 }],
      ["Target.exposeDevToolsProtocol", { targetId: "T" }],
      ["Browser.crash", {}],
      [
        "Input.dispatchDragEvent",
        { type: "drop", x: 1, y: 1, data: { items: [], files: ["/etc/passwd"], dragOperationsMask: 1 } }
      ]
    ] as const) {
      const verdict = inspect(JSON.stringify({ id: 4, method, params, sessionId: "S" }), context)
      assert.strictEqual(verdict._tag, "Answer", method)
      if (verdict._tag !== "Answer") continue
      const answer = JSON.parse(verdict.reply)
      assert.strictEqual(answer.error.code, -32000, method)
      assert.include(answer.error.message, "Refused by the service", method)
      assert.strictEqual(answer.sessionId, "S")
    }
    const drag = {
      type: "dragEnter",
      x: 1,
      y: 1,
      data: { items: [{ mimeType: "text/plain", data: "x" }], dragOperationsMask: 1 }
    }
    assert.deepStrictEqual(
      inspect(JSON.stringify({ id: 5, method: "Input.dispatchDragEvent", params: drag }), context),
      {
        _tag: "Forward"
      }
    )
  })

  it("sends downloads to the session's own directory, whatever path the client names", () => {
    for (const method of ["Browser.setDownloadBehavior", "Page.setDownloadBehavior"]) {
      const params = { behavior: "allow", downloadPath: "/root/.ssh", eventsEnabled: true }
      const verdict = inspect(JSON.stringify({ id: 3, method, params }), context)
      assert.strictEqual(verdict._tag, "Rewrite", method)
      if (verdict._tag !== "Rewrite") continue
      assert.deepStrictEqual(JSON.parse(verdict.frame), {
        id: 3,
        method,
        params: { ...params, downloadPath: "/srv/session/Downloads" }
      })
    }
    const deny = JSON.stringify({
      id: 4,
      method: "Browser.setDownloadBehavior",
      params: { behavior: "deny" }
    })
    assert.deepStrictEqual(inspect(deny, context), { _tag: "Forward" })
    const reset = inspect(
      JSON.stringify({ id: 5, method: "Browser.setDownloadBehavior", params: { behavior: "default" } }),
      context
    )
    assert.deepStrictEqual(
      reset._tag === "Rewrite" ? JSON.parse(reset.frame).params : reset,
      { behavior: "allow", downloadPath: "/srv/session/Downloads" },
      "back to the default is back to the session's own directory"
    )
  })

  it("knows which URLs are the browser's own", () => {
    for (const url of [
      "chrome://version",
      "CHROME://settings",
      " file:///etc/passwd",
      "devtools://devtools/bundled/inspector.html",
      "chrome-untrusted://terminal",
      "view-source:file:///etc/passwd"
    ]) {
      assert.isTrue(isBlockedUrl(url), url)
    }
    for (const url of [
      "https://example.com",
      "about:blank",
      "data:text/html,x",
      "view-source:https://a.b",
      5
    ]) {
      assert.isFalse(isBlockedUrl(url), String(url))
    }
  })
})
