import { Schema } from "effect"
import { wire } from "./ApiError.ts"

// `POST /v1/sessions/{id}/computer`: a browser session driven as computer-use
// agents drive a screen, by viewport coordinates and keys, with a screenshot to
// look at. The vocabulary is the one those agents' tools share (click at x,y,
// double and right click, move, drag, scroll, type, key chords, wait, a
// screenshot, the cursor's position); each action becomes the input events a
// person's mouse and keyboard would make, sent where the live view's go.

/** The most actions one call takes, and the most it may wait in all. */
export const MAX_ACTIONS = 20
export const MAX_WAIT_MS = 10_000
export const MAX_TOTAL_WAIT_MS = 20_000
/** The most characters one `type` action types. */
export const MAX_TYPED_CHARS = 5_000

const MODIFIERS: Readonly<Record<string, string>> = {
  ctrl: "Control",
  control: "Control",
  alt: "Alt",
  option: "Alt",
  shift: "Shift",
  meta: "Meta",
  cmd: "Meta",
  command: "Meta",
  super: "Meta",
  win: "Meta"
}

/** Named keys as agents write them (xdotool's names, DOM's, common short ones), lower-cased without `_`/`-`. */
const NAMED: Readonly<Record<string, string>> = {
  enter: "Enter",
  return: "Enter",
  kpenter: "Enter",
  tab: "Tab",
  esc: "Escape",
  escape: "Escape",
  backspace: "Backspace",
  delete: "Delete",
  del: "Delete",
  insert: "Insert",
  space: " ",
  home: "Home",
  end: "End",
  pageup: "PageUp",
  pagedown: "PageDown",
  up: "ArrowUp",
  down: "ArrowDown",
  left: "ArrowLeft",
  right: "ArrowRight",
  arrowup: "ArrowUp",
  arrowdown: "ArrowDown",
  arrowleft: "ArrowLeft",
  arrowright: "ArrowRight",
  ...Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`f${i + 1}`, `F${i + 1}`]))
}

/** A key of a chord: a modifier, or the key it modifies. */
export interface ChordKey {
  readonly modifier: boolean
  readonly key: string
}

/**
 * `raw` as the DOM's `key` value it names (`ctrl` is `Control`, `Return` is
 * `Enter`, `a` is `a`), or `undefined` for a name no keyboard has.
 */
export const chordKey = (raw: string): ChordKey | undefined => {
  if ([...raw].length === 1) return { modifier: false, key: raw }
  const name = raw.toLowerCase().replaceAll(/[_-]/g, "")
  const modifier = MODIFIERS[name]
  if (modifier !== undefined) return { modifier: true, key: modifier }
  const named = NAMED[name]
  return named === undefined ? undefined : { modifier: false, key: named }
}

const Coordinate = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 16_384 }))
const Delta = Schema.Finite.check(Schema.isBetween({ minimum: -100_000, maximum: 100_000 }))
const Button = Schema.Literals(["left", "middle", "right"])
const Point = Schema.Struct({ x: Coordinate, y: Coordinate })

const KeyName = Schema.String.check(
  Schema.makeFilter((raw: string) => chordKey(raw) !== undefined, {
    expected:
      "a key: a single character, or a name such as enter, tab, escape, ctrl, shift, alt, meta, up, f5"
  })
)
const describe = <S extends Schema.Top>(schema: S, description: string) => schema.annotate({ description })

const at = {
  x: describe(Coordinate, "Viewport x in CSS pixels, from the left."),
  y: describe(Coordinate, "Viewport y in CSS pixels, from the top.")
}

export const ComputerAction = Schema.Union([
  Schema.Struct({
    type: Schema.Literal("click"),
    ...at,
    button: Schema.optionalKey(describe(Button, "`left` (default), `middle` or `right`.")),
    click_count: Schema.optionalKey(
      describe(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 3 })), "1 (default) to 3.")
    )
  }),
  Schema.Struct({ type: Schema.Literal("double_click"), ...at }),
  Schema.Struct({ type: Schema.Literal("right_click"), ...at }),
  Schema.Struct({ type: Schema.Literal("move"), ...at }),
  Schema.Struct({
    type: Schema.Literal("mouse_down"),
    button: Schema.optionalKey(Button)
  }),
  Schema.Struct({
    type: Schema.Literal("mouse_up"),
    button: Schema.optionalKey(Button)
  }),
  Schema.Struct({
    type: Schema.Literal("drag"),
    path: describe(
      Schema.Array(Point).check(Schema.isMinLength(2), Schema.isMaxLength(100)),
      "The points the pointer goes through with the left button held: pressed at the first, released at the last."
    )
  }),
  Schema.Struct({
    type: Schema.Literal("scroll"),
    ...at,
    scroll_x: Schema.optionalKey(describe(Delta, "Pixels to scroll right (negative: left).")),
    scroll_y: Schema.optionalKey(describe(Delta, "Pixels to scroll down (negative: up)."))
  }),
  Schema.Struct({
    type: Schema.Literal("type"),
    text: describe(
      Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_TYPED_CHARS)),
      `Typed key by key into the focused element, up to ${MAX_TYPED_CHARS} characters.`
    )
  }),
  Schema.Struct({
    type: Schema.Literal("key"),
    keys: describe(
      Schema.Array(KeyName).check(Schema.isMinLength(1), Schema.isMaxLength(6)),
      'A chord, pressed in order and released in reverse: `["ctrl", "a"]`, `["Enter"]`, `["shift", "Tab"]`.'
    )
  }),
  Schema.Struct({
    type: Schema.Literal("wait"),
    ms: Schema.optionalKey(
      describe(
        Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_WAIT_MS })),
        `Milliseconds, 0 to ${MAX_WAIT_MS} (default 1000).`
      )
    )
  }),
  Schema.Struct({ type: Schema.Literal("screenshot") }),
  Schema.Struct({ type: Schema.Literal("cursor_position") })
]).annotate({ identifier: "ComputerAction" })
export type ComputerAction = typeof ComputerAction.Type

const waitOf = (action: ComputerAction) => (action.type === "wait" ? (action.ms ?? 1000) : 0)

export const ComputerRequest = Schema.Struct({
  actions: describe(
    Schema.Array(ComputerAction).check(
      Schema.isMinLength(1),
      Schema.isMaxLength(MAX_ACTIONS),
      Schema.makeFilter(
        (actions: ReadonlyArray<ComputerAction>) =>
          actions.reduce((sum, action) => sum + waitOf(action), 0) <= MAX_TOTAL_WAIT_MS,
        { expected: `waits of ${MAX_TOTAL_WAIT_MS} ms or less in all` }
      ),
      Schema.makeFilter(
        (actions: ReadonlyArray<ComputerAction>) =>
          actions.filter((action) => action.type === "screenshot").length <= 1,
        { expected: "one screenshot at most" }
      )
    ),
    `1 to ${MAX_ACTIONS} actions, done in order.`
  ),
  screenshot: Schema.optionalKey(
    describe(
      Schema.Boolean,
      "A screenshot after the last action (as a `screenshot` action at the end): one per call."
    )
  ),
  screenshot_scale: Schema.optionalKey(
    describe(
      Schema.Finite.check(Schema.isBetween({ minimum: 0.1, maximum: 1 })),
      "The screenshot's size as a share of the viewport's, 0.1 to 1 (default 1): coordinates stay in viewport pixels."
    )
  )
}).annotate({ identifier: "ComputerRequest" })
export type ComputerRequest = typeof ComputerRequest.Type

/** What one action did: where the pointer went, or where it is (`cursor_position`). */
export const ComputerResult = Schema.Struct({
  type: Schema.String,
  x: Schema.optionalKey(Schema.Number),
  y: Schema.optionalKey(Schema.Number)
})

export const ComputerScreenshot = Schema.Struct({
  mime_type: Schema.Literal("image/png"),
  data: describe(Schema.String, "The PNG, base64."),
  width: describe(Schema.Int, "The image's width in pixels."),
  height: describe(Schema.Int, "The image's height in pixels."),
  scale: describe(
    Schema.Number,
    "Image pixels per viewport CSS pixel: divide a point on the image by it for the action's coordinates."
  )
})

export const ComputerAnswer = Schema.Struct({
  results: Schema.Array(ComputerResult),
  cursor: describe(Point, "Where the pointer is after the last action."),
  viewport: describe(
    Schema.Struct({ width: Schema.Int, height: Schema.Int }),
    "The viewport the coordinates are in, in CSS pixels."
  ),
  screenshot: Schema.NullOr(ComputerScreenshot)
}).annotate({ identifier: "ComputerAnswer" })
export type ComputerAnswer = typeof ComputerAnswer.Type

/** An action's point is off the page's viewport: nothing of the call was done. */
export class OutOfViewport extends Schema.TaggedError<OutOfViewport>()("OutOfViewport", {
  detail: Schema.String
}) {
  readonly status = 422
  readonly code = "out_of_viewport"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new OutOfViewport({ detail: message }))
}
