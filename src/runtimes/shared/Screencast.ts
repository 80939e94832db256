import { Effect, type Scope } from "effect"
import type { CdpClient } from "../../platform/cdp/CdpClient.ts"
import { FrameThrottle } from "./FrameThrottle.ts"
import {
  type Frame,
  type FrameListener,
  type FrameMeta,
  NoPageOnScreen,
  PREVIEW_FPS,
  type Screencast
} from "../../runtime/Frames.ts"
import type { InputCommand } from "../../runtime/InputEvents.ts"
import { jpegSize } from "../../runtime/Jpeg.ts"
import { screencastsRunning } from "./LiveViewMetrics.ts"

// The library has always exported the frames contract beside the screencast (`Screencast.Frame`).
export {
  type Frame,
  type FrameListener,
  type FrameMeta,
  NoPageOnScreen,
  PREVIEW_FPS,
  type Screencast
} from "../../runtime/Frames.ts"

const INTERVAL_MS = 1000 / PREVIEW_FPS
/** Frames held for a slot are acknowledged this long before it, so a fresh one can be captured. */
const ACK_LEAD_MS = 50
/** JPEG quality and the largest frame sent; a bigger viewport is scaled down to fit. */
const QUALITY = 70
const MAX_WIDTH = 1920
const MAX_HEIGHT = 1080

interface RawFrame {
  readonly data: string
  readonly metadata: {
    readonly deviceWidth: number
    readonly deviceHeight: number
    readonly timestamp?: number
  }
  /** The screencast's frame number, acknowledged back. */
  readonly sessionId: number
}

interface TargetInfo {
  readonly targetId: string
  readonly type: string
  readonly url: string
  readonly browserContextId?: string
}

/**
 * The CDP side: tracks the browser's pages (of one context, when named) from its start and, while anyone
 * watches, follows the newest (a tab opened by the client comes on screen;
 * when the tab on screen closes, the newest left does), runs
 * `Page.startScreencast` on it through the service's own control connection,
 * and fans the throttled frames out. CDP work is serialized on one promise
 * chain; frames are decoded only when they are emitted.
 */
class Caster {
  private readonly listeners = new Set<FrameListener>()
  private latest: Frame | undefined
  /** Open pages by target id, oldest first, with their URLs. */
  private readonly pages = new Map<string, string>()
  private current:
    { readonly targetId: string; readonly sessionId: string; throttle: FrameThrottle<RawFrame> } | undefined
  private chain: Promise<void> = Promise.resolve()
  private unlisten: Array<() => void> = []
  private seq = 0
  private readonly control: CdpClient
  /** Told +1 when a CDP screencast starts and -1 when it stops (the node's gauge). */
  private readonly running: (delta: number) => void
  /** The context whose pages it shows (a context session's), or every page. */
  private readonly contextId: string | undefined

  constructor(control: CdpClient, running: (delta: number) => void, contextId: string | undefined) {
    this.control = control
    this.running = running
    this.contextId = contextId
    // Pages are tracked from the browser's start, so "newest" means the one the client opened last.
    const on = (method: string, listener: (params: any, sessionId: string | undefined) => void) =>
      this.unlisten.push(this.control.on(method, listener))
    on("Target.targetCreated", ({ targetInfo }: { targetInfo: TargetInfo }) => {
      if (targetInfo.type !== "page") return
      if (this.contextId !== undefined && targetInfo.browserContextId !== this.contextId) return
      this.pages.set(targetInfo.targetId, targetInfo.url)
      this.serially(() => this.follow())
    })
    on("Target.targetInfoChanged", ({ targetInfo }: { targetInfo: TargetInfo }) => {
      if (this.pages.has(targetInfo.targetId)) this.pages.set(targetInfo.targetId, targetInfo.url)
    })
    on("Target.targetDestroyed", ({ targetId }: { targetId: string }) => {
      this.pages.delete(targetId)
      this.serially(() => this.follow())
    })
    on("Page.screencastFrame", (params: RawFrame, sessionId) => {
      const current = this.current
      if (current !== undefined && sessionId === current.sessionId) current.throttle.push(params)
      else this.ack(params, sessionId)
    })
    // A targetCreated for every page open now, then one for each new page.
    this.serially(() =>
      this.control
        .send("Target.setDiscoverTargets", { discover: true, filter: [{ type: "page" }] })
        .then(() => {})
    )
  }

  get size() {
    return this.listeners.size
  }

  add(listener: FrameListener) {
    this.listeners.add(listener)
    if (this.latest !== undefined) listener(this.latest)
    if (this.listeners.size === 1) this.serially(() => this.follow())
  }

  remove(listener: FrameListener) {
    if (!this.listeners.delete(listener)) return
    if (this.listeners.size === 0) this.serially(() => this.stop())
  }

  async dispatch(commands: ReadonlyArray<InputCommand>): Promise<boolean> {
    const on = this.current
    if (on === undefined) return false
    for (const command of commands) await this.control.send(command.method, command.params, on.sessionId)
    return true
  }

  async close() {
    this.listeners.clear()
    for (const undo of this.unlisten) undo()
    this.unlisten = []
    this.serially(() => this.stop())
    await this.chain
  }

  private serially(step: () => Promise<void>) {
    this.chain = this.chain.then(step).catch(() => undefined)
  }

  /** Nobody watches: the screencast stops (the pages are still tracked). */
  private async stop() {
    this.latest = undefined
    await this.detach()
  }

  /** While someone watches, puts the newest open page on screen, if it is not already. */
  private async follow() {
    if (this.listeners.size === 0) return
    const newest = [...this.pages.keys()].at(-1)
    if (newest === this.current?.targetId) return
    await this.detach()
    if (newest === undefined) return
    const { sessionId } = await this.control.send<{ sessionId: string }>("Target.attachToTarget", {
      targetId: newest,
      flatten: true
    })
    const throttle = new FrameThrottle<RawFrame>({
      intervalMs: INTERVAL_MS,
      ackLeadMs: ACK_LEAD_MS,
      emit: (raw) => this.emit(raw, newest),
      ack: (raw) => this.ack(raw, sessionId)
    })
    this.current = { targetId: newest, sessionId, throttle }
    this.running(1)
    await this.control.send(
      "Page.startScreencast",
      { format: "jpeg", quality: QUALITY, maxWidth: MAX_WIDTH, maxHeight: MAX_HEIGHT },
      sessionId
    )
  }

  private async detach() {
    const was = this.current
    this.current = undefined
    if (was === undefined) return
    this.running(-1)
    was.throttle.close()
    await this.control.send("Page.stopScreencast", {}, was.sessionId).catch(() => undefined)
    await this.control.send("Target.detachFromTarget", { sessionId: was.sessionId }).catch(() => undefined)
  }

  private ack(raw: RawFrame, sessionId: string | undefined) {
    this.control
      .send("Page.screencastFrameAck", { sessionId: raw.sessionId }, sessionId)
      .catch(() => undefined)
  }

  private emit(raw: RawFrame, targetId: string) {
    const jpeg = Buffer.from(raw.data, "base64")
    const size = jpegSize(jpeg) ?? { width: raw.metadata.deviceWidth, height: raw.metadata.deviceHeight }
    const meta: FrameMeta = {
      type: "frame",
      seq: ++this.seq,
      timestamp:
        raw.metadata.timestamp === undefined ? Date.now() : Math.round(raw.metadata.timestamp * 1000),
      width: size.width,
      height: size.height,
      css_width: Math.round(raw.metadata.deviceWidth),
      css_height: Math.round(raw.metadata.deviceHeight),
      url: this.pages.get(targetId) ?? ""
    }
    const frame: Frame = { meta, metaText: JSON.stringify(meta), jpeg }
    this.latest = frame
    for (const listener of this.listeners) {
      try {
        listener(frame)
      } catch {
        // One viewer's failure is its own.
      }
    }
  }
}

/**
 * A session's screencast over its browser's control connection, closed with
 * the caller's scope (before the browser goes).
 */
export const make = (control: CdpClient, contextId?: string): Effect.Effect<Screencast, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.map(
        Effect.context<never>(),
        (context) =>
          new Caster(control, (delta) => screencastsRunning.modifyUnsafe(delta, context), contextId)
      ),
      (caster) => Effect.promise(() => caster.close())
    ),
    (caster): Screencast => ({
      subscribe: (listener) =>
        Effect.acquireRelease(
          Effect.sync(() => caster.add(listener)),
          () => Effect.sync(() => caster.remove(listener))
        ),
      dispatch: (commands) =>
        Effect.promise(() => caster.dispatch(commands).catch(() => true)).pipe(
          Effect.flatMap((sent) => (sent ? Effect.void : Effect.fail(new NoPageOnScreen())))
        ),
      subscribers: () => caster.size
    })
  )
