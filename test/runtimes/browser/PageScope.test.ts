import { assert, describe, it } from "@effect/vitest"
import * as PageScope from "../../../src/runtimes/browser/PageScope.ts"
import * as ContextScope from "../../../src/runtimes/context/ContextScope.ts"
import type { Send } from "../../../src/platform/net/Splice.ts"

// A page client's scope on CDP frames as Chromium writes them; the page relay
// with real clients through the service is in test/edge/live/CdpDiscovery.test.ts.

const send = (message: object) => JSON.stringify(message)

const frames = (sends: ReadonlyArray<Send>, to: "client" | "upstream") =>
  sends.filter((sent) => sent.to === to).map((sent) => JSON.parse(String(sent.frame)))

/** A page client's scope on a bare browser, its attach to page P answered with session S. */
const attached = () => {
  const scope = PageScope.make("P", PageScope.bare)
  const [attach] = frames(scope.open(), "upstream")
  assert.deepStrictEqual(
    { method: attach.method, params: attach.params },
    { method: "Target.attachToTarget", params: { targetId: "P", flatten: true } }
  )
  scope.fromUpstream(
    send({
      method: "Target.attachedToTarget",
      params: { sessionId: "S", targetInfo: { targetId: "P", type: "page" }, waitingForDebugger: false }
    })
  )
  assert.deepStrictEqual(scope.fromUpstream(send({ id: attach.id, result: { sessionId: "S" } })), [])
  return scope
}

describe("PageScope", () => {
  it("attaches to the page first, holding the client's commands, then sends them in the page's session", () => {
    const scope = PageScope.make("P", PageScope.bare)
    const [attach] = frames(scope.open(), "upstream")
    assert.deepStrictEqual(scope.fromClient({ id: 1, method: "Runtime.evaluate", params: {} }), [])
    const released = frames(
      scope.fromUpstream(send({ id: attach.id, result: { sessionId: "S" } })),
      "upstream"
    )
    assert.deepStrictEqual(released, [{ id: 1, method: "Runtime.evaluate", params: {}, sessionId: "S" }])
    assert.deepStrictEqual(frames(scope.fromClient({ id: 2, method: "Page.enable" }), "upstream"), [
      { id: 2, method: "Page.enable", sessionId: "S" }
    ])
    // A session the client attached itself (a frame, a worker) keeps its own.
    assert.deepStrictEqual(
      frames(scope.fromClient({ id: 3, method: "Runtime.enable", sessionId: "W" }), "upstream"),
      [{ id: 3, method: "Runtime.enable", sessionId: "W" }]
    )
    assert.strictEqual(scope.ended?.(), undefined)
  })

  it("gives the client the page's session's frames without their sessionId, its own sessions' as they are, nothing of the browser's", () => {
    const scope = attached()
    for (const frame of [
      '{"id":1,"result":{"result":{"type":"number","value":1}},"sessionId":"S"}',
      Buffer.from('{"method":"Page.loadEventFired","params":{"timestamp":1},"sessionId":"S"}')
    ]) {
      const expected = JSON.parse(String(frame).replace(/,"sessionId":"S"/, ""))
      const [out] = scope.fromUpstream(frame)
      assert.strictEqual(out!.to, "client")
      assert.deepStrictEqual(JSON.parse(String(out!.frame)), expected)
    }
    const child = send({ method: "Runtime.executionContextCreated", params: {}, sessionId: "W" })
    assert.deepStrictEqual(scope.fromUpstream(child), [{ to: "client", frame: child }])
    // Written otherwise, read whole.
    assert.deepStrictEqual(frames(scope.fromUpstream('{"sessionId":"S","id":4,"result":{}}'), "client"), [
      { id: 4, result: {} }
    ])
    for (const frame of [
      send({ method: "Target.targetCreated", params: { targetInfo: { targetId: "X", type: "page" } } }),
      send({ id: 5, result: {} }),
      "not json"
    ])
      assert.deepStrictEqual(scope.fromUpstream(frame), [], frame)
  })

  it("ends the connection when the page's session goes, or its attach is refused", () => {
    const scope = attached()
    scope.fromUpstream(
      send({ method: "Target.detachedFromTarget", params: { sessionId: "W", targetId: "F" } })
    )
    assert.strictEqual(scope.ended?.(), undefined)
    scope.fromUpstream(
      send({ method: "Target.detachedFromTarget", params: { sessionId: "S", targetId: "P" } })
    )
    assert.strictEqual(scope.ended?.(), "the page was closed")

    const refused = PageScope.make("P", PageScope.bare)
    const [attach] = frames(refused.open(), "upstream")
    refused.fromUpstream(
      send({ id: attach.id, error: { code: -32602, message: "No target with given id found" } })
    )
    assert.match(refused.ended?.() ?? "", /cannot attach to page P: No target with given id found/)
  })

  it("attaches through the session's own scope: a context session's page client reaches no other context's page", () => {
    const ours = page("P1", "CTX-OURS")
    const theirs = page("X1", "CTX-THEIRS")
    const open = (targetId: string) => {
      const scope = PageScope.make(targetId, ContextScope.make({ contextId: "CTX-OURS" }))
      const [browser, discovery] = frames(scope.open(), "upstream")
      // The context's own discovery goes first; the attach waits for it, as a client's command would.
      assert.deepStrictEqual(
        [browser.method, discovery.method],
        ["Target.getTargetInfo", "Target.setDiscoverTargets"]
      )
      for (const info of [ours, theirs])
        scope.fromUpstream(send({ method: "Target.targetCreated", params: { targetInfo: info } }))
      return { scope, released: scope.fromUpstream(send({ id: discovery.id, result: {} })) }
    }
    const mine = open("P1")
    assert.deepStrictEqual(frames(mine.released, "upstream"), [
      { id: 0, method: "Target.attachToTarget", params: { targetId: "P1", flatten: true } }
    ])
    const other = open("X1")
    assert.deepStrictEqual(frames(other.released, "upstream"), [])
    assert.match(other.scope.ended?.() ?? "", /No target with given id found/)
  })
})

const page = (targetId: string, browserContextId: string) => ({
  targetId,
  type: "page",
  title: "",
  url: "about:blank",
  attached: false,
  canAccessOpener: false,
  browserContextId
})
