import { Cause, Deferred, Effect, Exit, Fiber, Queue, type Scope } from "effect"
import type { CdpClient, CdpError } from "../../platform/cdp/CdpClient.ts"
import { FrameThrottle } from "./FrameThrottle.ts"
import {
  type Frame,
  type FrameListener,
  type FrameMeta,
  CopyFailed,
  NoPageOnScreen,
  PREVIEW_FPS,
  type Screencast,
  type Selection,
  type Tab,
  type Tabs,
  type TabsListener,
  UnknownTab
} from "../../runtime/Frames.ts"
import type { InputCommand } from "../../runtime/InputEvents.ts"
import { jpegSize } from "../../runtime/Jpeg.ts"
import * as PageSelection from "./PageSelection.ts"
import { screencastsRunning } from "./LiveViewMetrics.ts"

// The library has always exported the frames contract beside the screencast (`Screencast.Frame`).
export {
  CopyFailed,
  type Frame,
  type FrameListener,
  type FrameMeta,
  NoPageOnScreen,
  PREVIEW_FPS,
  type Screencast,
  type Selection,
  type Tab,
  type Tabs,
  type TabsListener,
  UnknownTab
} from "../../runtime/Frames.ts"

const INTERVAL_MS = 1000 / PREVIEW_FPS
/** Frames held for a slot are acknowledged this long before it, so a fresh one can be captured. */
const ACK_LEAD_MS = 50
/** How often the pages' titles are read again while a viewer follows them. */
const TITLES_EVERY = "1 second"
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
  readonly title: string
  readonly browserContextId?: string
}

/** A CDP step of the caster's: run one at a time, in order. */
type Step = Effect.Effect<void, CdpError>

/**
 * The CDP side: tracks the browser's pages (of one context, when named) from its start and, while anyone
 * watches, shows the chosen one (a tab opened by the client comes on screen, a
 * viewer may switch to another; when the tab on screen closes, the newest left
 * does), runs `Page.startScreencast` on it through the service's own control
 * connection, and fans the throttled frames out, and the pages to those who
 * follow them. Its CDP steps go to `steps`, run one at a time by the
 * screencast's worker; frames are decoded only when they are emitted.
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
  const tabsListeners = new Set<TabsListener>()
  let latest: Frame | undefined
  /** Open pages by target id, oldest first. */
  const pages = new Map<string, { readonly url: string; readonly title: string }>()
  /** The page to show: the one opened last, or switched to since; the newest when it has closed. */
  let chosen: string | undefined
  let current:
    | { readonly targetId: string; readonly sessionId: string; readonly throttle: FrameThrottle<RawFrame> }
    | undefined
  let seq = 0

  const serially = (step: Step) => {
    Queue.offerUnsafe(steps, step)
  }

  /** Queues `step` and waits until it has run (at once when the screencast has closed). */
  const seriallyDone = (step: Step) =>
    Effect.gen(function* () {
      const done = yield* Deferred.make<void>()
      if (Queue.offerUnsafe(steps, Effect.ensuring(step, Deferred.done(done, Exit.void))))
        yield* Deferred.await(done)
    })

  const onScreen = () => (chosen !== undefined && pages.has(chosen) ? chosen : [...pages.keys()].at(-1))

  /** The pages as they are now, made once for every listener. */
  const tabsNow = (): Tabs => {
    const active = onScreen()
    const tabs: Array<Tab> = [...pages].map(([id, page]) => ({ id, ...page, active: id === active }))
    return { tabs, text: JSON.stringify({ type: "tabs", tabs }) }
  }

  const announce = () => {
    if (tabsListeners.size === 0) return
    const now = tabsNow()
    for (const listener of tabsListeners) {
      try {
        listener(now)
      } catch {
        // One viewer's failure is its own.
      }
    }
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
      url: pages.get(targetId)?.url ?? ""
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

  const activate = (targetId: string): Step =>
    Effect.asVoid(control.send("Target.activateTarget", { targetId }))

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
      // In front, whatever the browser brought there: a tab behind another renders no frame (closing
      // a tab brings its neighbour to front, not the newest).
      yield* activate(targetId)
      yield* control.send(
        "Page.startScreencast",
        { format: "jpeg", quality: QUALITY, maxWidth: MAX_WIDTH, maxHeight: MAX_HEIGHT },
        sessionId
      )
    })

  /** While someone watches, puts the chosen page on screen, if it is not already. */
  const follow: Step = Effect.suspend(() => {
    if (listeners.size === 0) return Effect.void
    const next = onScreen()
    if (next === current?.targetId) return Effect.void
    return next === undefined ? detach : Effect.andThen(detach, attach(next))
  })

  /** Nobody watches: the screencast stops (the pages are still tracked). */
  const stop: Step = Effect.suspend(() => {
    latest = undefined
    return detach
  })

  const changed = (info: TargetInfo) => {
    const page = pages.get(info.targetId)
    // Most changes are of no tab's (its loading, who is attached): only a new address or title is told.
    if (page === undefined || (page.url === info.url && page.title === info.title)) return
    pages.set(info.targetId, { url: info.url, title: info.title })
    announce()
  }

  // Pages are tracked from the browser's start, so "newest" means the one the client opened last.
  const unlisten = [
    control.on("Target.targetCreated", ({ targetInfo }: { targetInfo: TargetInfo }) => {
      if (targetInfo.type !== "page") return
      if (contextId !== undefined && targetInfo.browserContextId !== contextId) return
      pages.set(targetInfo.targetId, { url: targetInfo.url, title: targetInfo.title })
      chosen = targetInfo.targetId
      announce()
      serially(follow)
    }),
    control.on("Target.targetInfoChanged", ({ targetInfo }: { targetInfo: TargetInfo }) =>
      changed(targetInfo)
    ),
    control.on("Target.targetDestroyed", ({ targetId }: { targetId: string }) => {
      if (pages.delete(targetId)) announce()
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
    /**
     * Reads the pages again while anyone follows them: Chromium tells a
     * navigation at once, but a page's title only when its targets are asked for.
     */
    refresh: Effect.suspend(() =>
      tabsListeners.size === 0
        ? Effect.void
        : Effect.map(
            control.send<{ targetInfos: ReadonlyArray<TargetInfo> }>("Target.getTargets"),
            ({ targetInfos }) => targetInfos.forEach(changed)
          )
    ),
    add: (listener: FrameListener) => {
      listeners.add(listener)
      if (latest !== undefined) listener(latest)
      if (listeners.size === 1) serially(follow)
    },
    remove: (listener: FrameListener) => {
      if (!listeners.delete(listener)) return
      if (listeners.size === 0) serially(stop)
    },
    addTabs: (listener: TabsListener) => {
      tabsListeners.add(listener)
      listener(tabsNow())
    },
    removeTabs: (listener: TabsListener) => {
      tabsListeners.delete(listener)
    },
    /**
     * Chooses the page `id` and waits until it is on screen and in front (where
     * it is already on screen, a client may have brought another to front).
     */
    switchTo: (id: string): Effect.Effect<void, UnknownTab> =>
      Effect.suspend(() => {
        if (!pages.has(id)) return Effect.fail(new UnknownTab({ id }))
        const moved = onScreen() !== id
        chosen = id
        if (moved) announce()
        return seriallyDone(Effect.andThen(follow, activate(id)))
      }),
    /** The selection of the page on screen; `undefined` when none is. */
    selection: (max: number): Effect.Effect<Selection | undefined, CdpError> =>
      Effect.suspend(() => {
        const on = current
        return on === undefined ? Effect.succeed(undefined) : PageSelection.read(control, on.sessionId, max)
      }),
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
      tabsListeners.clear()
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
        // It fails only when the connection has gone, with the browser or the screencast.
        yield* caster.refresh.pipe(
          Effect.ignore,
          Effect.andThen(Effect.sleep(TITLES_EVERY)),
          Effect.forever,
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
      subscribers: caster.size,
      tabs: (listener) =>
        Effect.acquireRelease(
          Effect.sync(() => caster.addTabs(listener)),
          () => Effect.sync(() => caster.removeTabs(listener))
        ),
      switchTo: caster.switchTo,
      selection: (max) =>
        caster.selection(max).pipe(
          Effect.catchTag("CdpError", () => Effect.fail(new CopyFailed())),
          Effect.flatMap((selection) =>
            selection === undefined ? Effect.fail(new NoPageOnScreen()) : Effect.succeed(selection)
          )
        )
    })
  )
