import { type Effect, Schema, type Scope } from "effect"
import type { InputCommand } from "./InputEvents.ts"

// The frames capability: a live runtime's screen as JPEG frames (the live
// view and the recorder watch it) and input sent to the page on screen.

/** The live view's frame rate (5 a second), enforced by the service whatever the page does. */
export const PREVIEW_FPS = 5
/** What a viewer is told with each frame (the live view's JSON text message before the JPEG). */
export interface FrameMeta {
  readonly type: "frame"
  /** Counts the frames this screencast emitted, from 1. */
  readonly seq: number
  /** When the browser captured the frame, in milliseconds since the epoch. */
  readonly timestamp: number
  /** The JPEG's size in pixels. */
  readonly width: number
  readonly height: number
  /** The page's viewport in CSS pixels: input coordinates are in these. */
  readonly css_width: number
  readonly css_height: number
  /** The page on screen. */
  readonly url: string
}

export interface Frame {
  readonly meta: FrameMeta
  /** `meta` as JSON, made once for every viewer. */
  readonly metaText: string
  readonly jpeg: Buffer
}

export type FrameListener = (frame: Frame) => void

/** Input arrived while no page is on screen (every tab was closed). */
export class NoPageOnScreen extends Schema.TaggedError<NoPageOnScreen>()("NoPageOnScreen", {}) {
  override readonly message = "no page is on screen"
}

/** One session's screencast as the rest of the service uses it. */
export interface Screencast {
  /**
   * Receives every frame emitted while the caller's scope is open, the
   * latest one first. The first subscriber starts the CDP screencast and the
   * last one to leave stops it: one screencast per session, however many watch.
   */
  readonly subscribe: (listener: FrameListener) => Effect.Effect<void, never, Scope.Scope>
  /** Sends input commands, in order, to the page on screen. */
  readonly dispatch: (commands: ReadonlyArray<InputCommand>) => Effect.Effect<void, NoPageOnScreen>
  /** Subscribers now (viewers and a recorder). */
  readonly subscribers: () => number
}
