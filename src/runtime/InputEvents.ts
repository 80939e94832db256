import { Result, Schema } from "effect"

// What a live-view viewer may send: JSON text messages. Input in the page's
// CSS pixels and pasted text, turned into `Input.*` commands for the page on
// screen; a switch to another tab; a request for the page's selection.

/** The most characters a paste carries, and a copy answers (beyond, it is cut and says so). */
export const CLIPBOARD_MAX = 100_000

const Coordinate = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 16_384 }))
const Delta = Schema.Finite.check(Schema.isBetween({ minimum: -100_000, maximum: 100_000 }))
const Modifier = Schema.Literals(["Alt", "Control", "Meta", "Shift"])
const Modifiers = Schema.Array(Modifier).check(Schema.isMaxLength(4))

const Paste = Schema.Struct({
  type: Schema.Literal("paste"),
  text: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(CLIPBOARD_MAX))
})
const SwitchTab = Schema.Struct({
  type: Schema.Literal("switch_tab"),
  id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128))
})
const Copy = Schema.Struct({ type: Schema.Literal("copy") })

export const InputMessage = Schema.Union([
  Schema.Struct({
    type: Schema.Literal("click"),
    x: Coordinate,
    y: Coordinate,
    button: Schema.optionalKey(Schema.Literals(["left", "middle", "right"])),
    click_count: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 3 }))),
    modifiers: Schema.optionalKey(Modifiers)
  }),
  Schema.Struct({ type: Schema.Literal("tap"), x: Coordinate, y: Coordinate }),
  Schema.Struct({ type: Schema.Literal("scroll"), x: Coordinate, y: Coordinate, dx: Delta, dy: Delta }),
  Schema.Struct({
    type: Schema.Literal("key"),
    key: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(32))),
    text: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(10_000))),
    modifiers: Schema.optionalKey(Modifiers)
  })
])
export type InputMessage = typeof InputMessage.Type

export const ViewerMessage = Schema.Union([InputMessage, Paste, SwitchTab, Copy])
export type ViewerMessage = typeof ViewerMessage.Type

/** One CDP command for the page's session. */
export interface InputCommand {
  readonly method: string
  readonly params: Record<string, unknown>
}

/** Named keys: DOM `key` value -> Windows virtual key code (what pages read as `keyCode`). */
const NAMED_KEYS: Readonly<Record<string, number>> = {
  Backspace: 8,
  Tab: 9,
  Enter: 13,
  Escape: 27,
  " ": 32,
  PageUp: 33,
  PageDown: 34,
  End: 35,
  Home: 36,
  ArrowLeft: 37,
  ArrowUp: 38,
  ArrowRight: 39,
  ArrowDown: 40,
  Insert: 45,
  Delete: 46,
  ...Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`F${i + 1}`, 112 + i]))
}

/** The text a key types, if any. */
const TYPED: Readonly<Record<string, string>> = { Enter: "\r", " ": " " }

const MODIFIER_BITS: Readonly<Record<string, number>> = { Alt: 1, Control: 2, Meta: 4, Shift: 8 }

export const modifierMask = (modifiers: ReadonlyArray<string> | undefined) =>
  (modifiers ?? []).reduce((mask, name) => mask | (MODIFIER_BITS[name] ?? 0), 0)

/**
 * What a viewer's message asks: input for the page on screen, text pasted
 * into it (which, like the rest below, a viewer waits on: refused aloud
 * without input, never ignored), another page on screen, or the selection.
 */
export type ViewerRequest =
  | { readonly _tag: "Input"; readonly commands: ReadonlyArray<InputCommand> }
  | { readonly _tag: "Paste"; readonly commands: ReadonlyArray<InputCommand> }
  | { readonly _tag: "SwitchTab"; readonly id: string }
  | { readonly _tag: "Copy" }

/** Why a message cannot be forwarded, as the viewer is told. */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  message: Schema.String
}) {}

const decode = Schema.decodeUnknownResult(Schema.fromJsonString(ViewerMessage))

/** The physical key a DOM `key` value comes from on a US keyboard (`KeyA`, `Digit1`, `Enter`), or "" for others. */
const codeOf = (key: string) =>
  /^[a-z]$/i.test(key)
    ? `Key${key.toUpperCase()}`
    : /^[0-9]$/.test(key)
      ? `Digit${key}`
      : key === " "
        ? "Space"
        : NAMED_KEYS[key] !== undefined
          ? key
          : ""

/** The Windows virtual key codes of the modifiers, and the physical key each is pressed on. */
const MODIFIER_KEYS: Readonly<Record<string, { readonly code: string; readonly keyCode: number }>> = {
  Alt: { code: "AltLeft", keyCode: 18 },
  Control: { code: "ControlLeft", keyCode: 17 },
  Meta: { code: "MetaLeft", keyCode: 91 },
  Shift: { code: "ShiftLeft", keyCode: 16 }
}

/**
 * A modifier pressed (`down`) or let go, with the modifiers held after it
 * (`held`, a mask of `modifierMask`'s bits): a chord's first and last steps.
 */
export const modifierCommand = (modifier: string, down: boolean, held: number): InputCommand => {
  const { code, keyCode } = MODIFIER_KEYS[modifier] ?? { code: "", keyCode: 0 }
  return {
    method: "Input.dispatchKeyEvent",
    params: {
      type: down ? "rawKeyDown" : "keyUp",
      key: modifier,
      code,
      modifiers: held,
      windowsVirtualKeyCode: keyCode,
      nativeVirtualKeyCode: keyCode
    }
  }
}

/**
 * One key pressed and let go with `modifiers` held (a mask of `modifierMask`'s
 * bits), as a keyboard sends it: typing text unless Control, Alt or Meta make
 * it a shortcut. An unknown key name is refused.
 */
export const keyCommands = (
  key: string,
  modifiers: number
): Result.Result<Array<InputCommand>, InvalidInput> => {
  const named = NAMED_KEYS[key]
  const single = [...key].length === 1
  if (named === undefined && !single) {
    return Result.fail(new InvalidInput({ message: `unknown key: ${key.slice(0, 32)}` }))
  }
  // With Control, Alt or Meta held a key is a shortcut, not typing.
  const shortcut = (modifiers & (MODIFIER_BITS.Alt! | MODIFIER_BITS.Control! | MODIFIER_BITS.Meta!)) !== 0
  const text = shortcut ? undefined : (TYPED[key] ?? (single ? key : undefined))
  const code = named ?? (/^[a-z0-9]$/i.test(key) ? key.toUpperCase().charCodeAt(0) : 0)
  const base = { key, code: codeOf(key), modifiers, windowsVirtualKeyCode: code, nativeVirtualKeyCode: code }
  return Result.succeed([
    {
      method: "Input.dispatchKeyEvent",
      params: {
        type: text === undefined ? "rawKeyDown" : "keyDown",
        ...base,
        ...(text === undefined ? {} : { text, unmodifiedText: text })
      }
    },
    { method: "Input.dispatchKeyEvent", params: { type: "keyUp", ...base } }
  ])
}

/**
 * A viewer's message as what it asks, or why it cannot be done: not JSON, not
 * one of the documented shapes, or an unknown key.
 */
export const parse = (text: string): Result.Result<ViewerRequest, InvalidInput> => {
  const decoded = decode(text)
  if (Result.isFailure(decoded)) {
    return Result.fail(
      new InvalidInput({
        message:
          'not an input message: send JSON such as {"type":"click","x":200,"y":150}, {"type":"tap","x":10,"y":20}, {"type":"scroll","x":0,"y":0,"dx":0,"dy":300}, {"type":"key","key":"Enter"}, {"type":"paste","text":"..."}, {"type":"copy"} or {"type":"switch_tab","id":"..."}'
      })
    )
  }
  const message = decoded.success
  switch (message.type) {
    case "paste":
      // What a person's paste types: the text as one insertion, as a `key` message's `text` is.
      return Result.succeed({
        _tag: "Paste",
        commands: [{ method: "Input.insertText", params: { text: message.text } }]
      })
    case "switch_tab":
      return Result.succeed({ _tag: "SwitchTab", id: message.id })
    case "copy":
      return Result.succeed({ _tag: "Copy" })
    default:
      return Result.map(toCommands(message), (commands) => ({ _tag: "Input", commands }))
  }
}

/** An input message as the CDP commands that carry it out, or why it cannot be (an unknown key). */
const toCommands = (message: InputMessage): Result.Result<Array<InputCommand>, InvalidInput> => {
  switch (message.type) {
    case "click": {
      const at = { x: message.x, y: message.y, modifiers: modifierMask(message.modifiers) }
      const press = { ...at, button: message.button ?? "left", clickCount: message.click_count ?? 1 }
      return Result.succeed([
        { method: "Input.dispatchMouseEvent", params: { type: "mouseMoved", ...at } },
        { method: "Input.dispatchMouseEvent", params: { type: "mousePressed", ...press } },
        { method: "Input.dispatchMouseEvent", params: { type: "mouseReleased", ...press } }
      ])
    }
    case "tap":
      return Result.succeed([
        {
          method: "Input.dispatchTouchEvent",
          params: { type: "touchStart", touchPoints: [{ x: message.x, y: message.y }] }
        },
        { method: "Input.dispatchTouchEvent", params: { type: "touchEnd", touchPoints: [] } }
      ])
    case "scroll":
      return Result.succeed([
        {
          method: "Input.dispatchMouseEvent",
          params: { type: "mouseWheel", x: message.x, y: message.y, deltaX: message.dx, deltaY: message.dy }
        }
      ])
    case "key": {
      if ((message.key === undefined) === (message.text === undefined)) {
        return Result.fail(new InvalidInput({ message: 'a key message has either "key" or "text"' }))
      }
      if (message.text !== undefined) {
        return Result.succeed([{ method: "Input.insertText", params: { text: message.text } }])
      }
      return keyCommands(message.key!, modifierMask(message.modifiers))
    }
  }
}
