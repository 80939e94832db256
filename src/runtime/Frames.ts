import { type Effect, Schema, type Scope } from "effect"
import type { InputCommand } from "./InputEvents.ts"

// The frames capability: a live runtime's screen as JPEG frames (the live
// view and the recorder watch it), its pages (which one is on screen), and
// input sent to the page on screen.

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

/** A page of the session as viewers are told of it (an entry of the live view's `tabs` message). */
export interface Tab {
  /** The page's DevTools target id: what a viewer's `switch_tab` names. */
  readonly id: string
  readonly url: string
  readonly title: string
  /** Whether it is the page on screen. */
  readonly active: boolean
}

/** The session's pages, oldest first. */
export interface Tabs {
  readonly tabs: ReadonlyArray<Tab>
  /** `{"type":"tabs","tabs":[...]}`, made once for every viewer. */
  readonly text: string
}

export type TabsListener = (tabs: Tabs) => void

/** The text selected on the page on screen, cut to the length asked for. */
export interface Selection {
  readonly text: string
  /** Whether more was selected than `text` holds. */
  readonly truncated: boolean
}

/** Input arrived while no page is on screen (every tab was closed). */
export class NoPageOnScreen extends Schema.TaggedError<NoPageOnScreen>()("NoPageOnScreen", {}) {
  override readonly message = "no page is on screen"
}

/** A viewer named a page the session does not have (closed meanwhile, or never its own). */
export class UnknownTab extends Schema.TaggedError<UnknownTab>()("UnknownTab", { id: Schema.String }) {
  override get message() {
    return `no tab ${this.id.slice(0, 64)} in this session`
  }
}

/** The page's selection could not be read (it navigated or closed as it was asked). */
export class CopyFailed extends Schema.TaggedError<CopyFailed>()("CopyFailed", {}) {
  override readonly message = "the page changed while its selection was read: try again"
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
  /**
   * Receives the session's pages while the caller's scope is open: now, then
   * whenever one opens, closes, navigates, changes its title or comes on screen.
   */
  readonly tabs: (listener: TabsListener) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Puts the page `id` on screen and in front: every subscriber's frames and
   * the input come from it from then on (until another page opens, or it closes).
   * Done when the screencast has moved.
   */
  readonly switchTo: (id: string) => Effect.Effect<void, UnknownTab>
  /** The selection of the page on screen (in a text field too), at most `max` characters of it. */
  readonly selection: (max: number) => Effect.Effect<Selection, NoPageOnScreen | CopyFailed>
  /** Subscribers now (viewers and a recorder). */
  readonly subscribers: () => number
}
