import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { CLIPBOARD_MAX, parse } from "../../src/runtime/InputEvents.ts"

const request = (message: unknown) => {
  const result = parse(JSON.stringify(message))
  assert.isTrue(Result.isSuccess(result), JSON.stringify(message))
  return Result.getOrThrow(result)
}

const commands = (message: unknown) => {
  const parsed = request(message)
  assert.strictEqual(parsed._tag, "Input", JSON.stringify(message))
  return parsed._tag === "Input" ? parsed.commands : []
}

const refusal = (text: string) => {
  const result = parse(text)
  assert.isTrue(Result.isFailure(result), text)
  return Result.isFailure(result) ? result.failure.message : ""
}

describe("live-view input messages", () => {
  it("a click is a move, a press and a release at that point, left button by default", () => {
    assert.deepStrictEqual(commands({ type: "click", x: 200, y: 150 }), [
      { method: "Input.dispatchMouseEvent", params: { type: "mouseMoved", x: 200, y: 150, modifiers: 0 } },
      {
        method: "Input.dispatchMouseEvent",
        params: { type: "mousePressed", x: 200, y: 150, modifiers: 0, button: "left", clickCount: 1 }
      },
      {
        method: "Input.dispatchMouseEvent",
        params: { type: "mouseReleased", x: 200, y: 150, modifiers: 0, button: "left", clickCount: 1 }
      }
    ])
    const right = commands({ type: "click", x: 1, y: 2, button: "right", modifiers: ["Shift", "Control"] })
    assert.deepInclude(right[1]!.params, { button: "right", modifiers: 10 })
  })

  it("a tap is a touch start and end, a scroll a wheel event", () => {
    assert.deepStrictEqual(
      commands({ type: "tap", x: 5, y: 6 }).map((c) => c.params.type),
      ["touchStart", "touchEnd"]
    )
    assert.deepStrictEqual(commands({ type: "scroll", x: 0, y: 0, dx: 0, dy: 300 }), [
      {
        method: "Input.dispatchMouseEvent",
        params: { type: "mouseWheel", x: 0, y: 0, deltaX: 0, deltaY: 300 }
      }
    ])
  })

  it("a key types its character, a named key carries its key code, text is inserted whole", () => {
    const a = commands({ type: "key", key: "a" })
    assert.deepInclude(a[0]!.params, { type: "keyDown", key: "a", text: "a", windowsVirtualKeyCode: 65 })
    assert.deepInclude(a[1]!.params, { type: "keyUp", key: "a" })
    const enter = commands({ type: "key", key: "Enter" })
    assert.deepInclude(enter[0]!.params, { type: "keyDown", text: "\r", windowsVirtualKeyCode: 13 })
    const left = commands({ type: "key", key: "ArrowLeft" })
    assert.deepInclude(left[0]!.params, { type: "rawKeyDown", windowsVirtualKeyCode: 37 })
    assert.notProperty(left[0]!.params, "text")
    // With Control held a letter is a shortcut: no text typed.
    const selectAll = commands({ type: "key", key: "a", modifiers: ["Control"] })
    assert.deepInclude(selectAll[0]!.params, { type: "rawKeyDown", modifiers: 2 })
    assert.deepStrictEqual(commands({ type: "key", text: "héllo ✓" }), [
      { method: "Input.insertText", params: { text: "héllo ✓" } }
    ])
  })

  it("answers anything else with a reason, never a throw", () => {
    for (const text of [
      "not json",
      "{}",
      "[]",
      '{"type":"click","x":-1,"y":0}',
      '{"type":"click","x":"1","y":0}',
      '{"type":"click","x":1e400,"y":0}',
      '{"type":"scroll","x":0,"y":0}',
      '{"type":"drag","x":0,"y":0}',
      '{"type":"key"}',
      '{"type":"key","key":""}',
      '{"type":"paste"}',
      '{"type":"paste","text":""}',
      '{"type":"paste","text":7}',
      JSON.stringify({ type: "paste", text: "x".repeat(CLIPBOARD_MAX + 1) }),
      '{"type":"switch_tab"}',
      '{"type":"switch_tab","id":""}',
      JSON.stringify({ type: "switch_tab", id: "A".repeat(129) }),
      '{"type":"switch_tab","id":42}',
      '{"type":"copy "}'
    ]) {
      assert.match(refusal(text), /not an input message|either "key" or "text"/, text)
    }
    assert.strictEqual(refusal('{"type":"key","key":"Hyper"}'), "unknown key: Hyper")
    assert.match(refusal('{"type":"key","key":"a","text":"b"}'), /either "key" or "text"/)
  })

  it("a paste is the text inserted whole, as a person's paste types it, up to its bound", () => {
    assert.deepStrictEqual(request({ type: "paste", text: " héllo\nwörld ✓\t" }), {
      _tag: "Paste",
      commands: [{ method: "Input.insertText", params: { text: " héllo\nwörld ✓\t" } }]
    })
    const longest = "y".repeat(CLIPBOARD_MAX)
    assert.deepStrictEqual(request({ type: "paste", text: longest }), {
      _tag: "Paste",
      commands: [{ method: "Input.insertText", params: { text: longest } }]
    })
  })

  it("a switch names its tab, a copy asks for the selection; neither is input for the page", () => {
    assert.deepStrictEqual(request({ type: "switch_tab", id: "9D2A5C0F1E" }), {
      _tag: "SwitchTab",
      id: "9D2A5C0F1E"
    })
    assert.deepStrictEqual(request({ type: "copy" }), { _tag: "Copy" })
    // Fields beyond the documented ones are let pass, as they are for input.
    assert.deepStrictEqual(request({ type: "copy", format: "text" }), { _tag: "Copy" })
  })
})
