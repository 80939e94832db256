import { Effect, Schema, type Scope } from "effect"
import WebSocket from "ws"

/**
 * The browser refused a command (its error reply, as `message (code)`), the
 * connection closed under one, or it could not be opened (`cause`: the
 * socket's own error).
 */
export class CdpError extends Schema.TaggedError<CdpError>()("CdpError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

/**
 * A minimal CDP client over one WebSocket, for the service's own commands
 * (screenshot, resize, version). It never auto-attaches to targets, so the
 * user's tabs are never paused waiting for it; page commands go through a
 * flattened session attached just for the call.
 */
export interface CdpClient {
  /** A command (in the attached session `sessionId`, when named), answered with its result. */
  readonly send: <T = unknown>(
    method: string,
    params?: object,
    sessionId?: string
  ) => Effect.Effect<T, CdpError>
  /**
   * A command nobody waits for (a screencast frame's acknowledgement): its
   * answer is dropped, and so is its failure, a closed connection included.
   */
  readonly post: (method: string, params?: object, sessionId?: string) => void
  /**
   * Calls `listener` with each event `method` (of any attached session, named
   * by `sessionId`) until the returned function is called.
   */
  readonly on: (method: string, listener: CdpListener) => () => void
}

export type CdpListener = (params: any, sessionId: string | undefined) => void

/** A command's waiter: resumed once, with its result or its failure. */
type Waiter = (answer: Effect.Effect<any, CdpError>) => void

/**
 * A connection to the DevTools endpoint `url`, closed with the caller's scope.
 * Not open within `timeoutMs`: `CdpError`.
 */
export const connect = (url: string, timeoutMs = 10_000): Effect.Effect<CdpClient, CdpError, Scope.Scope> =>
  Effect.acquireRelease(open(url, timeoutMs), (opened) => Effect.sync(() => opened.socket.terminate())).pipe(
    Effect.map((opened) => opened.client)
  )

const open = (url: string, timeoutMs: number) =>
  Effect.callback<{ readonly client: CdpClient; readonly socket: WebSocket }, CdpError>((resume) => {
    // Its own browser's frames, parsed as JSON here: ws's UTF-8 pass over each would be a second read.
    const socket = new WebSocket(url, {
      perMessageDeflate: false,
      maxPayload: 256 * 1024 * 1024,
      skipUTF8Validation: true
    })
    const pending = new Map<number, Waiter>()
    const listeners = new Map<string, Set<CdpListener>>()
    let nextId = 1
    const timer = setTimeout(() => {
      socket.terminate()
      resume(Effect.fail(new CdpError({ message: `CDP connect to ${url} timed out` })))
    }, timeoutMs)
    const closed = () => Effect.fail(new CdpError({ message: "CDP connection closed" }))

    socket.on("message", (data) => {
      const message = JSON.parse(data.toString())
      if (typeof message.id !== "number") {
        const subscribed = listeners.get(message.method)
        if (subscribed !== undefined) {
          for (const listener of subscribed) listener(message.params, message.sessionId)
        }
        return
      }
      const waiter = pending.get(message.id)
      if (waiter === undefined) return
      pending.delete(message.id)
      waiter(
        message.error
          ? Effect.fail(new CdpError({ message: `${message.error.message} (${message.error.code})` }))
          : Effect.succeed(message.result)
      )
    })
    socket.on("close", () => {
      // A waiter resumes its fiber at once: the map is emptied before any of them runs.
      const waiters = [...pending.values()]
      pending.clear()
      const failure = closed()
      for (const waiter of waiters) waiter(failure)
    })
    socket.on("error", (error) => {
      clearTimeout(timer)
      resume(Effect.fail(new CdpError({ message: error.message, cause: error })))
    })

    const write = (id: number, method: string, params: object, sessionId: string | undefined) =>
      socket.send(
        JSON.stringify(sessionId === undefined ? { id, method, params } : { id, method, params, sessionId })
      )
    const client: CdpClient = {
      send: <T>(method: string, params: object = {}, sessionId?: string) =>
        Effect.callback<T, CdpError>((resume) => {
          if (socket.readyState !== WebSocket.OPEN) return resume(closed())
          const id = nextId++
          pending.set(id, resume)
          write(id, method, params, sessionId)
          // Given up on (a timeout, an interrupt): its late answer finds no waiter.
          return Effect.sync(() => {
            pending.delete(id)
          })
        }),
      post: (method, params = {}, sessionId) => {
        if (socket.readyState === WebSocket.OPEN) write(nextId++, method, params, sessionId)
      },
      on: (method, listener) => {
        let subscribed = listeners.get(method)
        if (subscribed === undefined) listeners.set(method, (subscribed = new Set()))
        subscribed.add(listener)
        return () => {
          subscribed.delete(listener)
          if (subscribed.size === 0) listeners.delete(method)
        }
      }
    }
    socket.on("open", () => {
      clearTimeout(timer)
      resume(Effect.succeed({ client, socket }))
    })
    // Given up on while connecting.
    return Effect.sync(() => {
      clearTimeout(timer)
      socket.terminate()
    })
  })

/** A target as `Target.getTargets` describes it. */
export interface TargetInfo {
  readonly targetId: string
  readonly type: string
  readonly title: string
  readonly url: string
  readonly attached: boolean
  readonly browserContextId?: string
}

/** The browser's account of itself, as `Browser.getVersion` gives it. */
export interface BrowserVersion {
  readonly protocolVersion: string
  /** `Chrome/156.0.8078.114` */
  readonly product: string
  /** The source revision it was built from, `@` and a commit. */
  readonly revision: string
  readonly userAgent: string
  /** V8's version. */
  readonly jsVersion: string
}

export const version = (client: CdpClient) => client.send<BrowserVersion>("Browser.getVersion")

/**
 * Page targets, most recently active first (Chromium's order): of one
 * browser context (a context session's, in a browser others share), or all.
 */
export const pageTargets = (client: CdpClient, contextId?: string) =>
  Effect.map(client.send<{ targetInfos: Array<TargetInfo> }>("Target.getTargets"), ({ targetInfos }) =>
    targetInfos.filter(
      (target) => target.type === "page" && (contextId === undefined || target.browserContextId === contextId)
    )
  )

/** Runs `f` with a flattened session on the target, detaching afterwards. */
export const withPageSession = <A, E, R>(
  client: CdpClient,
  targetId: string,
  f: (sessionId: string) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | CdpError, R> =>
  Effect.acquireUseRelease(
    client.send<{ sessionId: string }>("Target.attachToTarget", { targetId, flatten: true }),
    ({ sessionId }) => f(sessionId),
    // It fails only when there is nothing left to detach from: the page closed, or the connection.
    ({ sessionId }) => Effect.ignore(client.send("Target.detachFromTarget", { sessionId }))
  )

/**
 * PNG of the current page, of the context when one is named (a blank tab is
 * opened when the user closed them all).
 */
export const screenshot = (client: CdpClient, contextId?: string): Effect.Effect<Uint8Array, CdpError> =>
  Effect.gen(function* () {
    const pages = yield* pageTargets(client, contextId)
    if (pages.length === 0) {
      const { targetId } = yield* client.send<{ targetId: string }>("Target.createTarget", {
        url: "about:blank",
        ...(contextId === undefined ? {} : { browserContextId: contextId })
      })
      pages.push({ targetId, type: "page", title: "", url: "about:blank", attached: false })
    }
    // The tab in front: one behind another renders no frame, and its capture would wait forever.
    for (const page of pages) {
      const shot = yield* withPageSession(client, page.targetId, (sessionId) =>
        Effect.gen(function* () {
          const { result } = yield* client.send<{ result: { value?: unknown } }>(
            "Runtime.evaluate",
            { expression: "document.visibilityState", returnByValue: true },
            sessionId
          )
          return result.value === "visible"
            ? (yield* client.send<{ data: string }>("Page.captureScreenshot", { format: "png" }, sessionId))
                .data
            : undefined
        })
      )
      if (shot !== undefined) return Buffer.from(shot, "base64")
    }
    // None in front (a client hid them all): the first one, brought to the front.
    const { data } = yield* withPageSession(client, pages[0]!.targetId, (sessionId) =>
      Effect.andThen(
        client.send("Page.bringToFront", {}, sessionId),
        client.send<{ data: string }>("Page.captureScreenshot", { format: "png" }, sessionId)
      )
    )
    return Buffer.from(data, "base64")
  })

/**
 * Height of the browser UI headless Chromium emulates around the page
 * (toolbar): the window must be this much taller than the wanted viewport.
 */
export const measureFrameHeight = (client: CdpClient): Effect.Effect<number, CdpError> =>
  Effect.gen(function* () {
    const [page] = yield* pageTargets(client)
    if (page === undefined) return 0
    const { result } = yield* withPageSession(client, page.targetId, (sessionId) =>
      client.send<{ result: { value?: number } }>(
        "Runtime.evaluate",
        { expression: "window.outerHeight - window.innerHeight", returnByValue: true },
        sessionId
      )
    )
    return Math.max(0, result.value ?? 0)
  })

/**
 * Sets the viewport of every window (of the context's pages when one is
 * named; windows opened later take the last size) to `width` x `height` CSS
 * pixels.
 */
export const resize = (
  client: CdpClient,
  width: number,
  viewportHeight: number,
  frameHeight: number,
  contextId?: string
): Effect.Effect<void, CdpError> =>
  Effect.gen(function* () {
    const height = viewportHeight + frameHeight
    const windows = new Set<number>()
    for (const page of yield* pageTargets(client, contextId)) {
      const { windowId } = yield* client.send<{ windowId: number }>("Browser.getWindowForTarget", {
        targetId: page.targetId
      })
      windows.add(windowId)
    }
    for (const windowId of windows) {
      yield* client.send("Browser.setWindowBounds", { windowId, bounds: { windowState: "normal" } })
      yield* client.send("Browser.setWindowBounds", { windowId, bounds: { width, height } })
    }
  })
