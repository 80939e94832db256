import { assert, describe, it } from "@effect/vitest"
import { OWN_IDS } from "../../../src/runtimes/context/ContextRules.ts"
import * as ContextScope from "../../../src/runtimes/context/ContextScope.ts"
import * as CdpGuard from "../../../src/runtimes/browser/CdpGuard.ts"
import type { Command } from "../../../src/platform/net/Splice.ts"

// The scope's logic on CDP frames as Chromium writes them; the relay's
// end-to-end behaviour with real clients is in ContextSessions.test.ts.

/** A client's frame as the relay hands it to the scope: past the guard, which must let it through. */
const checked = (message: object | string): Command => {
  const frame = typeof message === "string" ? message : JSON.stringify(message)
  const verdict = CdpGuard.inspect(Buffer.from(frame), false, {
    downloadsDir: "/downloads",
    uploadsDir: "/nonexistent/uploads"
  })
  if (verdict._tag !== "Send") throw new Error(`the guard refused ${frame}: ${verdict.reply}`)
  return verdict.command
}

/** What the relay does with a client's frame: the guard's answer, or the scope's routing of its command. */
const relayed = (scope: ContextScope.ContextScope, message: object) => {
  const verdict = CdpGuard.inspect(Buffer.from(JSON.stringify(message)), false, {
    downloadsDir: "/downloads",
    uploadsDir: "/downloads-uploads"
  })
  return verdict._tag === "Send"
    ? scope.fromClient(verdict.command)
    : [{ to: "client" as const, frame: verdict.reply }]
}

const OURS = "CTX-OURS"
const THEIRS = "CTX-THEIRS"

const page = (targetId: string, browserContextId: string, type = "page") => ({
  targetId,
  type,
  title: "",
  url: "about:blank",
  attached: false,
  canAccessOpener: false,
  browserContextId
})

/** This connection's browser target, and another connection's. */
const BROWSER = {
  targetId: "B-OURS",
  type: "browser",
  title: "",
  url: "",
  attached: true,
  canAccessOpener: false
}
const OTHER_BROWSER = { ...BROWSER, targetId: "B-OTHER" }

const frames = (sends: ReadonlyArray<ContextScope.Send>, to: "client" | "upstream") =>
  sends.filter((send) => send.to === to).map((send) => JSON.parse(String(send.frame)))

const send = (message: object) => JSON.stringify(message)

/** A scope past its own discovery, with one page of ours and one of another context's. */
const opened = () => {
  const scope = ContextScope.make({ contextId: OURS })
  const [browser, discovery] = scope.open().map((own) => JSON.parse(String(own.frame)))
  scope.fromUpstream(send({ id: browser.id, result: { targetInfo: BROWSER } }))
  for (const info of [page("P1", OURS), page("T1", OURS, "tab"), page("X1", THEIRS), OTHER_BROWSER])
    scope.fromUpstream(send({ method: "Target.targetCreated", params: { targetInfo: info } }))
  scope.fromUpstream(send({ id: discovery.id, result: {} }))
  return scope
}

/** `opened`, with the client attached to P1 as session S1. */
const attached = () => {
  const scope = opened()
  const out = scope.fromUpstream(
    send({
      method: "Target.attachedToTarget",
      params: { sessionId: "S1", targetInfo: page("P1", OURS), waitingForDebugger: false }
    })
  )
  assert.strictEqual(frames(out, "client").length, 1)
  return scope
}

describe("ContextScope", () => {
  it("starts its own discovery and holds the client's frames until Chromium has described the targets", () => {
    const scope = ContextScope.make({ contextId: OURS })
    const [browser, own] = scope.open().map((send) => JSON.parse(String(send.frame)))
    assert.strictEqual(browser.method, "Target.getTargetInfo")
    assert.strictEqual(own.method, "Target.setDiscoverTargets")
    assert.isAtLeast(own.id, OWN_IDS)
    assert.deepStrictEqual(scope.fromClient(checked({ id: 1, method: "Target.getBrowserContexts" })), [])
    scope.fromUpstream(send({ method: "Target.targetCreated", params: { targetInfo: page("P1", OURS) } }))
    const released = scope.fromUpstream(send({ id: own.id, result: {} }))
    assert.deepStrictEqual(frames(released, "client"), [{ id: 1, result: { browserContextIds: [] } }])
  })

  it("announces only the context's targets, through the client's filter, and its later ones", () => {
    const scope = opened()
    const announced = frames(
      scope.fromClient(
        checked({
          id: 2,
          method: "Target.setDiscoverTargets",
          params: { discover: true, filter: [{ type: "tab", exclude: true }, {}] }
        })
      ),
      "client"
    )
    assert.deepStrictEqual(announced[0], { id: 2, result: {} })
    assert.deepStrictEqual(
      announced.slice(1).map((event) => [event.method, event.params.targetInfo.targetId]),
      [
        ["Target.targetCreated", "B-OURS"],
        ["Target.targetCreated", "P1"]
      ]
    )
    const theirs = scope.fromUpstream(
      send({ method: "Target.targetCreated", params: { targetInfo: page("X2", THEIRS) } })
    )
    assert.deepStrictEqual(theirs, [])
    const ours = scope.fromUpstream(
      send({ method: "Target.targetCreated", params: { targetInfo: page("P2", OURS) } })
    )
    assert.strictEqual(frames(ours, "client")[0].params.targetInfo.targetId, "P2")
    assert.deepStrictEqual(
      scope.fromUpstream(send({ method: "Target.targetDestroyed", params: { targetId: "X1" } })),
      []
    )
    assert.strictEqual(
      frames(
        scope.fromUpstream(send({ method: "Target.targetDestroyed", params: { targetId: "P2" } })),
        "client"
      ).length,
      1
    )
  })

  it("filters Target.getTargets' answer to the context and shows no context but the client's default", () => {
    const scope = opened()
    const asked = frames(scope.fromClient(checked({ id: 3, method: "Target.getTargets" })), "upstream")
    assert.deepStrictEqual(asked, [{ id: 3, method: "Target.getTargets" }])
    const answered = frames(
      scope.fromUpstream(
        send({
          id: 3,
          result: { targetInfos: [page("P1", OURS), page("X1", THEIRS), { targetId: "B", type: "browser" }] }
        })
      ),
      "client"
    )
    assert.deepStrictEqual(
      answered[0].result.targetInfos.map((info: { targetId: string }) => info.targetId),
      ["P1"]
    )
  })

  it("creates targets, cookies, downloads and permissions in the session's context, and refuses another's", () => {
    const scope = opened()
    for (const method of [
      "Target.createTarget",
      "Storage.getCookies",
      "Browser.setDownloadBehavior",
      "Browser.grantPermissions"
    ]) {
      const [forwarded] = frames(
        scope.fromClient(checked({ id: 4, method, params: { url: "about:blank" } })),
        "upstream"
      )
      assert.strictEqual(forwarded.params.browserContextId, OURS, method)
      const [refused] = frames(
        scope.fromClient(checked({ id: 5, method, params: { browserContextId: THEIRS } })),
        "client"
      )
      assert.match(refused.error.message, /browser context/, method)
    }
  })

  it("answers a CDP error to commands on another context's targets, sessions and windows, and to browser-wide ones", () => {
    const scope = attached()
    const refusals: Array<[object, RegExp]> = [
      [{ id: 6, method: "Target.attachToTarget", params: { targetId: "X1", flatten: true } }, /No target/],
      [{ id: 7, method: "Target.closeTarget", params: { targetId: "X1" } }, /No target/],
      [{ id: 8, method: "Target.activateTarget", params: { targetId: "nope" } }, /No target/],
      [{ id: 9, method: "Target.detachFromTarget", params: { sessionId: "S-THEIRS" } }, /No session/],
      [
        { id: 10, method: "Browser.setWindowBounds", params: { windowId: 7, bounds: {} } },
        /window not found/
      ],
      [
        { id: 11, method: "Runtime.evaluate", params: { expression: "1" }, sessionId: "S-THEIRS" },
        /Session with given id not found/
      ],
      [{ id: 12, method: "Target.createBrowserContext" }, /one browser context/],
      [
        { id: 13, method: "Target.disposeBrowserContext", params: { browserContextId: THEIRS } },
        /ends with the session/
      ],
      [
        { id: 14, method: "Target.disposeBrowserContext", params: { browserContextId: OURS } },
        /ends with the session/
      ],
      [{ id: 15, method: "Target.attachToBrowserTarget" }, /browser target/],
      [{ id: 16, method: "SystemInfo.getProcessInfo" }, /beyond this session's browser context/],
      [{ id: 17, method: "Tracing.start" }, /beyond this session's browser context/],
      [{ id: 18, method: "Browser.getWindowForTarget" }, /No target/],
      [{ id: 19, method: "Target.setAutoAttach", params: { autoAttach: true, flatten: false } }, /flatten/],
      [
        { id: 20, method: "Storage.getCookies", params: { browserContextId: THEIRS }, sessionId: "S1" },
        /browser context/
      ],
      [{ id: OWN_IDS, method: "Browser.getVersion" }, /service's own/]
    ]
    for (const [message, reason] of refusals) {
      const sends = relayed(scope, message)
      assert.deepStrictEqual(frames(sends, "upstream"), [], JSON.stringify(message))
      const [reply] = frames(sends, "client")
      assert.strictEqual(reply.id, (message as { id: number }).id)
      assert.match(reply.error.message, reason, JSON.stringify(message))
    }
  })

  it("passes the context's own: its pages' sessions, targets, windows and the browser's version", () => {
    const scope = attached()
    const passes = [
      { id: 21, method: "Runtime.evaluate", params: { expression: "1" }, sessionId: "S1" },
      { id: 22, method: "Target.attachToTarget", params: { targetId: "P1", flatten: true } },
      { id: 23, method: "Browser.getWindowForTarget", params: { targetId: "P1" } },
      { id: 24, method: "Browser.getVersion" },
      {
        id: 25,
        method: "Target.setAutoAttach",
        params: { autoAttach: true, waitForDebuggerOnStart: true, flatten: true }
      }
    ]
    for (const message of passes)
      assert.deepStrictEqual(frames(scope.fromClient(checked(message)), "upstream"), [message])
    scope.fromUpstream(send({ id: 23, result: { windowId: 7, bounds: {} } }))
    const bounds = {
      id: 26,
      method: "Browser.setWindowBounds",
      params: { windowId: 7, bounds: { width: 800 } }
    }
    assert.deepStrictEqual(frames(scope.fromClient(checked(bounds)), "upstream"), [bounds])
  })

  it("holds the browser's own domains in a page's session to the browser level's rules: Chromium reaches every context there", () => {
    const scope = attached()
    const refusals: Array<[object, RegExp]> = [
      [
        {
          id: 40,
          method: "Target.attachToTarget",
          params: { targetId: "X1", flatten: true },
          sessionId: "S1"
        },
        /No target/
      ],
      [{ id: 41, method: "Target.closeTarget", params: { targetId: "X1" }, sessionId: "S1" }, /No target/],
      [{ id: 42, method: "Target.getTargetInfo", params: { targetId: "X1" }, sessionId: "S1" }, /No target/],
      [
        { id: 43, method: "Browser.setWindowBounds", params: { windowId: 9, bounds: {} }, sessionId: "S1" },
        /window not found/
      ],
      [{ id: 44, method: "Target.createBrowserContext", sessionId: "S1" }, /one browser context/],
      [
        { id: 45, method: "SystemInfo.getProcessInfo", sessionId: "S1" },
        /beyond this session's browser context/
      ],
      [
        { id: 46, method: "Target.setDiscoverTargets", params: { discover: true }, sessionId: "S1" },
        /on the connection itself/
      ]
    ]
    for (const [message, reason] of refusals) {
      const sends = relayed(scope, message)
      assert.deepStrictEqual(frames(sends, "upstream"), [], JSON.stringify(message))
      const [reply] = frames(sends, "client")
      assert.strictEqual(reply.sessionId, "S1")
      assert.match(reply.error.message, reason, JSON.stringify(message))
    }
    // A page made from a page's session is the context's, not the default context's.
    const [created] = frames(
      scope.fromClient(
        checked({ id: 47, method: "Target.createTarget", params: { url: "about:blank" }, sessionId: "S1" })
      ),
      "upstream"
    )
    assert.strictEqual(created.params.browserContextId, OURS)
    // Its list of targets is the context's.
    assert.strictEqual(
      frames(scope.fromClient(checked({ id: 48, method: "Target.getTargets", sessionId: "S1" })), "upstream")
        .length,
      1
    )
    const [listed] = frames(
      scope.fromUpstream(
        send({ id: 48, result: { targetInfos: [page("P1", OURS), page("X1", THEIRS)] }, sessionId: "S1" })
      ),
      "client"
    )
    assert.deepStrictEqual(
      listed.result.targetInfos.map((info: { targetId: string }) => info.targetId),
      ["P1"]
    )
    assert.strictEqual(listed.sessionId, "S1")
    // Its own window, asked without naming its target (as playwright asks), is the context's.
    const window = { id: 49, method: "Browser.getWindowForTarget", sessionId: "S1" }
    assert.deepStrictEqual(frames(scope.fromClient(checked(window)), "upstream"), [window])
    scope.fromUpstream(send({ id: 49, result: { windowId: 9, bounds: {} }, sessionId: "S1" }))
    const bounds = {
      id: 50,
      method: "Browser.setWindowBounds",
      params: { windowId: 9, bounds: { width: 800 } },
      sessionId: "S1"
    }
    assert.deepStrictEqual(frames(scope.fromClient(checked(bounds)), "upstream"), [bounds])
  })

  it("lets go of another context's target that auto-attach caught, resuming it, and the client hears nothing of it", () => {
    const scope = attached()
    const caught = scope.fromUpstream(
      send({
        method: "Target.attachedToTarget",
        params: { sessionId: "S-THEIRS", targetInfo: page("X1", THEIRS), waitingForDebugger: true }
      })
    )
    assert.deepStrictEqual(frames(caught, "client"), [])
    const own = frames(caught, "upstream")
    assert.deepStrictEqual(
      own.map((message) => [message.method, message.sessionId ?? message.params.sessionId]),
      [
        ["Runtime.runIfWaitingForDebugger", "S-THEIRS"],
        ["Target.detachFromTarget", "S-THEIRS"]
      ]
    )
    for (const message of own) assert.isAtLeast(message.id, OWN_IDS)
    // Its answers, its events and its detach never reach the client.
    const later = [
      send({ id: own[0].id, result: {}, sessionId: "S-THEIRS" }),
      send({ method: "Runtime.consoleAPICalled", params: { args: [] }, sessionId: "S-THEIRS" }),
      send({ id: own[1].id, result: {} }),
      send({ method: "Target.detachedFromTarget", params: { sessionId: "S-THEIRS", targetId: "X1" } })
    ]
    for (const frame of later) assert.deepStrictEqual(scope.fromUpstream(frame), [], frame)
    // Its session id is no way in.
    const [reply] = frames(
      scope.fromClient(checked({ id: 27, method: "Runtime.evaluate", params: {}, sessionId: "S-THEIRS" })),
      "client"
    )
    assert.match(reply.error.message, /Session with given id not found/)
  })

  it("treats a child attached under one of the context's sessions (a frame, a worker) as the context's", () => {
    const scope = attached()
    const child = send({
      method: "Target.attachedToTarget",
      params: { sessionId: "S2", targetInfo: { targetId: "W1", type: "worker" }, waitingForDebugger: true },
      sessionId: "S1"
    })
    assert.deepStrictEqual(scope.fromUpstream(child), [{ to: "client", frame: child }])
    const command = { id: 28, method: "Runtime.runIfWaitingForDebugger", sessionId: "S2" }
    assert.deepStrictEqual(frames(scope.fromClient(checked(command)), "upstream"), [command])
    const event = send({ method: "Runtime.executionContextCreated", params: {}, sessionId: "S2" })
    assert.deepStrictEqual(scope.fromUpstream(event), [{ to: "client", frame: event }])
  })

  it("passes downloads begun in the context's pages, not another's", () => {
    const scope = attached()
    const theirs = send({
      method: "Browser.downloadWillBegin",
      params: { frameId: "X1", guid: "G2", url: "x", suggestedFilename: "x" }
    })
    assert.deepStrictEqual(scope.fromUpstream(theirs), [])
    assert.deepStrictEqual(
      scope.fromUpstream(
        send({ method: "Browser.downloadProgress", params: { guid: "G2", state: "completed" } })
      ),
      []
    )
    const ours = send({
      method: "Browser.downloadWillBegin",
      params: { frameId: "P1", guid: "G1", url: "x", suggestedFilename: "x" }
    })
    assert.strictEqual(scope.fromUpstream(ours).length, 1)
    assert.strictEqual(
      scope.fromUpstream(
        send({ method: "Browser.downloadProgress", params: { guid: "G1", state: "completed" } })
      ).length,
      1
    )
  })

  it("forwards what the guard checked, written anew: a duplicated key cannot mean something else to Chromium", () => {
    const scope = attached()
    const duplicate =
      '{"id":29,"method":"Runtime.evaluate","sessionId":"S-THEIRS","params":{},"sessionId":"S1"}'
    const [forwarded] = scope.fromClient(checked(duplicate))
    assert.strictEqual(forwarded!.to, "upstream")
    assert.strictEqual(String(forwarded!.frame).match(/sessionId/g)?.length, 1)
    assert.strictEqual(JSON.parse(String(forwarded!.frame)).sessionId, "S1")
    // A command with an id the scope cannot route is its to refuse, whatever the guard let through.
    const [refused] = frames(scope.fromClient({ id: OWN_IDS + 1, method: "Browser.getVersion" }), "client")
    assert.match(refused.error.message, /the service's own/)
  })

  it("gives the connection's own browser target, not another connection's, and checks a session on it as the connection itself", () => {
    const scope = opened()
    const [refused] = frames(
      scope.fromClient(
        checked({ id: 30, method: "Target.attachToTarget", params: { targetId: "B-OTHER", flatten: true } })
      ),
      "client"
    )
    assert.match(refused.error.message, /No target/)
    const attach = { id: 31, method: "Target.attachToTarget", params: { targetId: "B-OURS", flatten: true } }
    assert.deepStrictEqual(frames(scope.fromClient(checked(attach)), "upstream"), [attach])
    scope.fromUpstream(
      send({
        method: "Target.attachedToTarget",
        params: { sessionId: "SB", targetInfo: BROWSER, waitingForDebugger: false }
      })
    )
    scope.fromUpstream(send({ id: 31, result: { sessionId: "SB" } }))
    for (const [message, reason] of [
      [
        { id: 32, method: "SystemInfo.getProcessInfo", sessionId: "SB" },
        /beyond this session's browser context/
      ],
      [
        {
          id: 33,
          method: "Target.attachToTarget",
          params: { targetId: "X1", flatten: true },
          sessionId: "SB"
        },
        /No target/
      ],
      [
        { id: 34, method: "Storage.getCookies", params: { browserContextId: THEIRS }, sessionId: "SB" },
        /browser context/
      ]
    ] as const) {
      const [reply] = frames(scope.fromClient(checked(message)), "client")
      assert.strictEqual(reply.sessionId, "SB")
      assert.match(reply.error.message, reason)
    }
    const [injected] = frames(
      scope.fromClient(checked({ id: 35, method: "Storage.getCookies", sessionId: "SB" })),
      "upstream"
    )
    assert.deepStrictEqual(injected, {
      id: 35,
      method: "Storage.getCookies",
      sessionId: "SB",
      params: { browserContextId: OURS }
    })
    // Its auto-attach catches another context's page: let go, in that session.
    const caught = frames(
      scope.fromUpstream(
        send({
          method: "Target.attachedToTarget",
          params: { sessionId: "S-THEIRS", targetInfo: page("X1", THEIRS), waitingForDebugger: false },
          sessionId: "SB"
        })
      ),
      "upstream"
    )
    assert.deepStrictEqual(
      caught.map((message) => [message.method, message.sessionId]),
      [["Target.detachFromTarget", "SB"]]
    )
  })
})
