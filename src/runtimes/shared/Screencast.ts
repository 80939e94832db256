import { Cause, Effect, Fiber, Queue, type Scope } from "effect"
import type { CdpClient, CdpError } from "../../platform/cdp/CdpClient.ts"
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

/** A CDP step of the caster's: run one at a time, in order. */
type Step = Effect.Effect<void, CdpError>

/**
 * The CDP side: tracks the browser's pages (of one context, when named) from its start and, while anyone
 * watches, follows the newest (a tab opened by the client comes on screen;
 * when the tab on screen closes, the newest left does), runs
 * `Page.startScreencast` on it through the service's own control connection,
 * and fans the throttled frames out. Its CDP steps go to `steps`, run one at
 * a time by the screencast's worker; frames are decoded only when they are
 * emitted.
 */
const makeCaster = (
  control: CdpClient,
  /** Told +1 when a CDP screencast starts and -1 when it stops (the node's gauge). */
  running: (delta: number) => void,
  /** The context whose pages it shows (a context session's), or every page. */
  contextId: string | undefined,
  steps: Queue.Enqueue<Step, Cause.Done>
) => {
  const listeners = new Set<FrameListener>()
  let latest: Frame | undefined
  /** Open pages by target id, oldest first, with their URLs. */
  const pages = new Map<string, string>()
  let current:
    | { readonly targetId: string; readonly sessionId: string; readonly throttle: FrameThrottle<RawFrame> }
    | undefined
  let seq = 0

  const serially = (step: Step) => {
    Queue.offerUnsafe(steps, step)
  }

  const ack = (raw: RawFrame, sessionId: string | undefined) =>
    control.post("Page.screencastFrameAck", { sessionId: raw.sessionId }, sessionId)

  const emit = (raw: RawFrame, targetId: string) => {
    const jpeg = Buffer.from(raw.data, "base64")
    const size = jpegSize(jpeg) ?? { width: raw.metadata.deviceWidth, height: raw.metadata.deviceHeight }
    const meta: FrameMeta = {
      type: "frame",
      seq: ++seq,
      timestamp:
        raw.metadata.timestamp === undefined ? Date.now() : Math.round(raw.metadata.timestamp * 1000),
      width: size.width,
      height: size.height,
      css_width: Math.round(raw.metadata.deviceWidth),
      css_height: Math.round(raw.metadata.deviceHeight),
      url: pages.get(targetId) ?? ""
    }
    const frame: Frame = { meta, metaText: JSON.stringify(meta), jpeg }
    latest = frame
    for (const listener of listeners) {
      try {
        listener(frame)
      } catch {
        // One viewer's failure is its own.
      }
    }
  }

  const detach: Step = Effect.suspend(() => {
    const was = current
    current = undefined
    if (was === undefined) return Effect.void
    running(-1)
    was.throttle.close()
    // Each fails only when the page, or the connection, has gone: nothing is left to stop.
    return Effect.andThen(
      Effect.ignore(control.send("Page.stopScreencast", {}, was.sessionId)),
      Effect.ignore(control.send("Target.detachFromTarget", { sessionId: was.sessionId }))
    )
  })

  const attach = (targetId: string): Step =>
    Effect.gen(function* () {
      const { sessionId } = yield* control.send<{ sessionId: string }>("Target.attachToTarget", {
        targetId,
        flatten: true
      })
      const throttle = new FrameThrottle<RawFrame>({
        intervalMs: INTERVAL_MS,
        ackLeadMs: ACK_LEAD_MS,
        emit: (raw) => emit(raw, targetId),
        ack: (raw) => ack(raw, sessionId)
      })
      current = { targetId, sessionId, throttle }
      running(1)
      yield* control.send(
        "Page.startScreencast",
        { format: "jpeg", quality: QUALITY, maxWidth: MAX_WIDTH, maxHeight: MAX_HEIGHT },
        sessionId
      )
    })

  /** While someone watches, puts the newest open page on screen, if it is not already. */
  const follow: Step = Effect.suspend(() => {
    if (listeners.size === 0) return Effect.void
    const newest = [...pages.keys()].at(-1)
    if (newest === current?.targetId) return Effect.void
    return newest === undefined ? detach : Effect.andThen(detach, attach(newest))
  })

  /** Nobody watches: the screencast stops (the pages are still tracked). */
  const stop: Step = Effect.suspend(() => {
    latest = undefined
    return detach
  })

  // Pages are tracked from the browser's start, so "newest" means the one the client opened last.
  const unlisten = [
    control.on("Target.targetCreated", ({ targetInfo }: { targetInfo: TargetInfo }) => {
      if (targetInfo.type !== "page") return
      if (contextId !== undefined && targetInfo.browserContextId !== contextId) return
      pages.set(targetInfo.targetId, targetInfo.url)
      serially(follow)
    }),
    control.on("Target.targetInfoChanged", ({ targetInfo }: { targetInfo: TargetInfo }) => {
      if (pages.has(targetInfo.targetId)) pages.set(targetInfo.targetId, targetInfo.url)
    }),
    control.on("Target.targetDestroyed", ({ targetId }: { targetId: string }) => {
      pages.delete(targetId)
      serially(follow)
    }),
    control.on("Page.screencastFrame", (params: RawFrame, sessionId) => {
      if (current !== undefined && sessionId === current.sessionId) current.throttle.push(params)
      else ack(params, sessionId)
    })
  ]
  // A targetCreated for every page open now, then one for each new page.
  serially(
    Effect.asVoid(control.send("Target.setDiscoverTargets", { discover: true, filter: [{ type: "page" }] }))
  )

  return {
    size: () => listeners.size,
    add: (listener: FrameListener) => {
      listeners.add(listener)
      if (latest !== undefined) listener(latest)
      if (listeners.size === 1) serially(follow)
    },
    remove: (listener: FrameListener) => {
      if (!listeners.delete(listener)) return
      if (listeners.size === 0) serially(stop)
    },
    /** Sends `commands` in order to the page on screen; `false` when none is. */
    dispatch: (commands: ReadonlyArray<InputCommand>): Effect.Effect<boolean, CdpError> =>
      Effect.suspend(() => {
        const on = current
        if (on === undefined) return Effect.succeed(false)
        return Effect.as(
          Effect.forEach(commands, (command) => control.send(command.method, command.params, on.sessionId), {
            discard: true
          }),
          true
        )
      }),
    /** Stops listening, and queues the screencast's stop: the last step. */
    close: () => {
      listeners.clear()
      for (const undo of unlisten) undo()
      serially(stop)
    }
  }
}

/**
 * A session's screencast over its browser's control connection, closed with
 * the caller's scope (before the browser goes): its last steps run before
 * the scope moves on.
 */
export const make = (control: CdpClient, contextId?: string): Effect.Effect<Screencast, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.gen(function* () {
        const context = yield* Effect.context<never>()
        const steps = yield* Queue.unbounded<Step, Cause.Done>()
        const caster = makeCaster(
          control,
          (delta) => screencastsRunning.modifyUnsafe(delta, context),
          contextId,
          steps
        )
        // A failed step is dropped, whatever failed it (mostly a page that went meanwhile): the next
        // one starts from what is. The worker ends with the queue.
        const worker = yield* Queue.take(steps).pipe(
          Effect.flatMap(Effect.ignoreCause),
          Effect.forever,
          Effect.catchIf(Cause.isDone, () => Effect.void),
          Effect.forkScoped
        )
        return { caster, steps, worker }
      }),
      ({ caster, steps, worker }) =>
        Effect.sync(() => caster.close()).pipe(
          Effect.andThen(Queue.end(steps)),
          Effect.andThen(Fiber.join(worker))
        )
    ),
    ({ caster }): Screencast => ({
      subscribe: (listener) =>
        Effect.acquireRelease(
          Effect.sync(() => caster.add(listener)),
          () => Effect.sync(() => caster.remove(listener))
        ),
      dispatch: (commands) =>
        caster.dispatch(commands).pipe(
          // The page on screen went meanwhile (closed, or another came): the input goes with it.
          Effect.catchTag("CdpError", () => Effect.succeed(true)),
          Effect.flatMap((sent) => (sent ? Effect.void : Effect.fail(new NoPageOnScreen())))
        ),
      subscribers: caster.size
    })
  )
