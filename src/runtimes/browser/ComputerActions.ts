import { Effect, Result } from "effect"
import { chordKey, type ComputerAction, type ComputerAnswer } from "../../kernel/Computer.ts"
import type * as Cdp from "../../platform/cdp/CdpClient.ts"
import { PageActionFailed } from "../../runtime/Drive.ts"
import { type InputCommand, keyCommands, modifierCommand, modifierMask } from "../../runtime/InputEvents.ts"

/** Where a session's pointer is: kept by its runtime from one call to the next, in viewport CSS pixels. */
export interface Pointer {
  x: number
  y: number
  /** The buttons held down (`mouse_down` without its `mouse_up` yet), as CDP's `buttons` bit mask. */
  buttons: number
}

export const newPointer = (): Pointer => ({ x: 0, y: 0, buttons: 0 })

const BUTTON_BITS = { left: 1, right: 2, middle: 4 } as const
type Button = keyof typeof BUTTON_BITS

interface Viewport {
  readonly width: number
  readonly height: number
  /** The visual viewport's top-left corner in the document (what a screenshot's clip is relative to). */
  readonly pageX: number
  readonly pageY: number
}

/**
 * The page's visual viewport as the browser lays it out (emulated sizes
 * included, scrollbars not), read from the browser, not from the page: a page
 * cannot see it read, nor lie about it.
 */
const viewportOf = (client: Cdp.CdpClient, sessionId: string) =>
  Effect.map(
    client.send<{
      cssVisualViewport: { clientWidth: number; clientHeight: number; pageX: number; pageY: number }
    }>("Page.getLayoutMetrics", {}, sessionId),
    ({ cssVisualViewport: v }): Viewport => ({
      width: Math.floor(v.clientWidth),
      height: Math.floor(v.clientHeight),
      pageX: v.pageX,
      pageY: v.pageY
    })
  )

/** The points an action puts the pointer at, to check against the viewport before anything is sent. */
const pointsOf = (action: ComputerAction): ReadonlyArray<{ readonly x: number; readonly y: number }> => {
  switch (action.type) {
    case "click":
    case "double_click":
    case "right_click":
    case "move":
    case "scroll":
      return [action]
    case "drag":
      return action.path
    default:
      return []
  }
}

const outside = (viewport: Viewport, index: number, action: ComputerAction) => {
  const off = pointsOf(action).find(
    (point) => point.x < 0 || point.y < 0 || point.x >= viewport.width || point.y >= viewport.height
  )
  return off === undefined
    ? undefined
    : new PageActionFailed({
        reason: "out_of_viewport",
        detail: `Action ${index} (${action.type}): (${off.x}, ${off.y}) is outside the viewport, ${viewport.width}x${viewport.height} CSS pixels; nothing was done.`
      })
}

const mouse = (type: string, pointer: Pointer, extra: Record<string, unknown> = {}): InputCommand => ({
  method: "Input.dispatchMouseEvent",
  params: { type, x: pointer.x, y: pointer.y, buttons: pointer.buttons, pointerType: "mouse", ...extra }
})

/** The pointer to (x, y), as a mouse moving there (with whatever buttons it holds). */
const moveTo = (pointer: Pointer, x: number, y: number): InputCommand => {
  pointer.x = x
  pointer.y = y
  return mouse("mouseMoved", pointer, { button: pointer.buttons === 0 ? "none" : heldButton(pointer) })
}

const heldButton = (pointer: Pointer): Button =>
  pointer.buttons & 1 ? "left" : pointer.buttons & 2 ? "right" : "middle"

const press = (pointer: Pointer, button: Button, clickCount: number): InputCommand => {
  pointer.buttons |= BUTTON_BITS[button]
  return mouse("mousePressed", pointer, { button, clickCount })
}

const release = (pointer: Pointer, button: Button, clickCount: number): InputCommand => {
  pointer.buttons &= ~BUTTON_BITS[button]
  return mouse("mouseReleased", pointer, { button, clickCount })
}

/** A click as a mouse makes it: each press of a double click counts up, as the browser counts them. */
const clicks = (pointer: Pointer, x: number, y: number, button: Button, count: number) => [
  moveTo(pointer, x, y),
  ...Array.from({ length: count }, (_, i) => [
    press(pointer, button, i + 1),
    release(pointer, button, i + 1)
  ]).flat()
]

/** Key chords as a keyboard sends them: modifiers down in order, the key, modifiers up in reverse. */
const chord = (keys: ReadonlyArray<string>): Array<InputCommand> => {
  const named = keys.map((raw) => chordKey(raw)!)
  const modifiers = named.filter((key) => key.modifier).map((key) => key.key)
  const commands: Array<InputCommand> = []
  modifiers.forEach((modifier, i) => {
    commands.push(modifierCommand(modifier, true, modifierMask(modifiers.slice(0, i + 1))))
  })
  const mask = modifierMask(modifiers)
  for (const key of named.filter((each) => !each.modifier)) {
    // Decoding checked every name: a key refused here is a defect.
    commands.push(...Result.getOrThrow(keyCommands(key.key, mask)))
  }
  modifiers
    .slice()
    .reverse()
    .forEach((modifier, i, downs) => {
      commands.push(modifierCommand(modifier, false, modifierMask(downs.slice(i + 1))))
    })
  return commands
}

/** Text typed key by key: each character its key press (a line break is Enter), as a person types it. */
const typing = (text: string): Array<InputCommand> =>
  [...text].flatMap((char) =>
    Result.getOrThrow(keyCommands(char === "\n" || char === "\r" ? "Enter" : char === "\t" ? "Tab" : char, 0))
  )

/** The PNG's size from its header (IHDR: width and height, big-endian, at bytes 16 and 20). */
const pngSize = (png: Buffer) => ({ width: png.readUInt32BE(16), height: png.readUInt32BE(20) })

const capture = (client: Cdp.CdpClient, sessionId: string, scale: number) =>
  Effect.gen(function* () {
    const viewport = yield* viewportOf(client, sessionId)
    const { data } = yield* client.send<{ data: string }>(
      "Page.captureScreenshot",
      {
        format: "png",
        clip: { x: viewport.pageX, y: viewport.pageY, width: viewport.width, height: viewport.height, scale }
      },
      sessionId
    )
    const size = pngSize(Buffer.from(data, "base64"))
    return {
      mime_type: "image/png" as const,
      data,
      width: size.width,
      height: size.height,
      scale: viewport.width === 0 ? scale : size.width / viewport.width
    }
  })

/**
 * Runs `actions` in order on the page attached as `sessionId`, as input
 * events through the page's input pipeline (what the live view sends), the
 * pointer kept in `pointer` between calls. Every point is checked against
 * the viewport first: one outside it refuses the call with nothing done.
 */
export const run = (
  client: Cdp.CdpClient,
  sessionId: string,
  actions: ReadonlyArray<ComputerAction>,
  scale: number,
  pointer: Pointer
): Effect.Effect<ComputerAnswer, PageActionFailed | Cdp.CdpError> =>
  Effect.gen(function* () {
    const viewport = yield* viewportOf(client, sessionId)
    for (const [index, action] of actions.entries()) {
      const refused = outside(viewport, index, action)
      if (refused !== undefined) return yield* refused
    }
    const sendAll = (commands: ReadonlyArray<InputCommand>) =>
      Effect.forEach(commands, (command) => client.send(command.method, command.params, sessionId), {
        discard: true
      })
    const results: Array<ComputerAnswer["results"][number]> = []
    let screenshot: ComputerAnswer["screenshot"] = null
    for (const action of actions) {
      switch (action.type) {
        case "click":
          yield* sendAll(
            clicks(pointer, action.x, action.y, action.button ?? "left", action.click_count ?? 1)
          )
          break
        case "double_click":
          yield* sendAll(clicks(pointer, action.x, action.y, "left", 2))
          break
        case "right_click":
          yield* sendAll(clicks(pointer, action.x, action.y, "right", 1))
          break
        case "move":
          yield* sendAll([moveTo(pointer, action.x, action.y)])
          break
        case "mouse_down":
          yield* sendAll([press(pointer, action.button ?? "left", 1)])
          break
        case "mouse_up":
          yield* sendAll([release(pointer, action.button ?? "left", 1)])
          break
        case "drag": {
          const [first, ...rest] = action.path
          yield* sendAll([moveTo(pointer, first!.x, first!.y), press(pointer, "left", 1)])
          // A person's drag takes a moment between points: pages that track the pointer see each one.
          for (const point of rest) {
            yield* sendAll([moveTo(pointer, point.x, point.y)])
            yield* Effect.sleep("16 millis")
          }
          yield* sendAll([release(pointer, "left", 1)])
          break
        }
        case "scroll":
          yield* sendAll([
            moveTo(pointer, action.x, action.y),
            mouse("mouseWheel", pointer, { deltaX: action.scroll_x ?? 0, deltaY: action.scroll_y ?? 0 })
          ])
          break
        case "type":
          yield* sendAll(typing(action.text))
          break
        case "key":
          yield* sendAll(chord(action.keys))
          break
        case "wait":
          yield* Effect.sleep(action.ms ?? 1000)
          break
        case "screenshot":
          screenshot = yield* capture(client, sessionId, scale)
          break
        case "cursor_position":
          break
      }
      results.push(
        pointsOf(action).length > 0 || action.type === "cursor_position" || action.type.startsWith("mouse_")
          ? { type: action.type, x: pointer.x, y: pointer.y }
          : { type: action.type }
      )
    }
    return {
      results,
      cursor: { x: pointer.x, y: pointer.y },
      viewport: { width: viewport.width, height: viewport.height },
      screenshot
    }
  })
