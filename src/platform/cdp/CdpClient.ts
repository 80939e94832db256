import WebSocket from "ws"

/**
 * A minimal CDP client over one WebSocket, for the service's own commands
 * (screenshot, resize, version). It never auto-attaches to targets, so the
 * user's tabs are never paused waiting for it; page commands go through a
 * flattened session attached just for the call.
 */
export interface CdpClient {
  readonly send: <T = unknown>(method: string, params?: object, sessionId?: string) => Promise<T>
  /**
   * Calls `listener` with each event `method` (of any attached session, named
   * by `sessionId`) until the returned function is called.
   */
  readonly on: (method: string, listener: CdpListener) => () => void
  readonly close: () => void
}

export type CdpListener = (params: any, sessionId: string | undefined) => void

export class CdpError extends Error {
  override readonly name = "CdpError"
}

export const connect = (url: string, timeoutMs = 10_000): Promise<CdpClient> =>
  new Promise((resolve, reject) => {
    // Its own browser's frames, parsed as JSON here: ws's UTF-8 pass over each would be a second read.
    const socket = new WebSocket(url, {
      perMessageDeflate: false,
      maxPayload: 256 * 1024 * 1024,
      skipUTF8Validation: true
    })
    const pending = new Map<number, { resolve: (value: any) => void; reject: (error: Error) => void }>()
    const listeners = new Map<string, Set<CdpListener>>()
    let nextId = 1
    const timer = setTimeout(() => {
      socket.terminate()
      reject(new CdpError(`CDP connect to ${url} timed out`))
    }, timeoutMs)

    const failAll = (error: Error) => {
      for (const { reject } of pending.values()) reject(error)
      pending.clear()
    }

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
      if (message.error) waiter.reject(new CdpError(`${message.error.message} (${message.error.code})`))
      else waiter.resolve(message.result)
    })
    socket.on("close", () => failAll(new CdpError("CDP connection closed")))
    socket.on("error", (error) => {
      clearTimeout(timer)
      reject(error)
    })
    socket.on("open", () => {
      clearTimeout(timer)
      resolve({
        send: (method, params = {}, sessionId) =>
          new Promise((resolve, reject) => {
            if (socket.readyState !== WebSocket.OPEN) return reject(new CdpError("CDP connection closed"))
            const id = nextId++
            pending.set(id, { resolve, reject })
            socket.send(
              JSON.stringify(
                sessionId === undefined ? { id, method, params } : { id, method, params, sessionId }
              )
            )
          }),
        on: (method, listener) => {
          let subscribed = listeners.get(method)
          if (subscribed === undefined) listeners.set(method, (subscribed = new Set()))
          subscribed.add(listener)
          return () => {
            subscribed.delete(listener)
            if (subscribed.size === 0) listeners.delete(method)
          }
        },
        close: () => socket.terminate()
      })
    })
  })

interface TargetInfo {
  readonly targetId: string
  readonly type: string
  readonly url: string
  readonly attached: boolean
  readonly browserContextId?: string
}

/**
 * Page targets, most recently active first (Chromium's order): of one
 * browser context (a context session's, in a browser others share), or all.
 */
export const pageTargets = async (client: CdpClient, contextId?: string) => {
  const { targetInfos } = await client.send<{ targetInfos: Array<TargetInfo> }>("Target.getTargets")
  return targetInfos.filter(
    (target) => target.type === "page" && (contextId === undefined || target.browserContextId === contextId)
  )
}

/** Runs `f` with a flattened session on the target, detaching afterwards. */
export const withPageSession = async <A>(
  client: CdpClient,
  targetId: string,
  f: (sessionId: string) => Promise<A>
): Promise<A> => {
  const { sessionId } = await client.send<{ sessionId: string }>("Target.attachToTarget", {
    targetId,
    flatten: true
  })
  try {
    return await f(sessionId)
  } finally {
    await client.send("Target.detachFromTarget", { sessionId }).catch(() => undefined)
  }
}

/**
 * PNG of the current page, of the context when one is named (a blank tab is
 * opened when the user closed them all).
 */
export const screenshot = async (client: CdpClient, contextId?: string): Promise<Uint8Array> => {
  const pages = await pageTargets(client, contextId)
  if (pages.length === 0) {
    const { targetId } = await client.send<{ targetId: string }>("Target.createTarget", {
      url: "about:blank",
      ...(contextId === undefined ? {} : { browserContextId: contextId })
    })
    pages.push({ targetId, type: "page", url: "about:blank", attached: false })
  }
  // The tab in front: one behind another renders no frame, and its capture would wait forever.
  for (const page of pages) {
    const shot = await withPageSession(client, page.targetId, async (sessionId) => {
      const { result } = await client.send<{ result: { value?: unknown } }>(
        "Runtime.evaluate",
        { expression: "document.visibilityState", returnByValue: true },
        sessionId
      )
      return result.value === "visible"
        ? (await client.send<{ data: string }>("Page.captureScreenshot", { format: "png" }, sessionId)).data
        : undefined
    })
    if (shot !== undefined) return Buffer.from(shot, "base64")
  }
  // None in front (a client hid them all): the first one, brought to the front.
  const { data } = await withPageSession(client, pages[0]!.targetId, async (sessionId) => {
    await client.send("Page.bringToFront", {}, sessionId)
    return client.send<{ data: string }>("Page.captureScreenshot", { format: "png" }, sessionId)
  })
  return Buffer.from(data, "base64")
}

/**
 * Height of the browser UI headless Chromium emulates around the page
 * (toolbar): the window must be this much taller than the wanted viewport.
 */
export const measureFrameHeight = async (client: CdpClient): Promise<number> => {
  const [page] = await pageTargets(client)
  if (page === undefined) return 0
  const { result } = await withPageSession(client, page.targetId, (sessionId) =>
    client.send<{ result: { value?: number } }>(
      "Runtime.evaluate",
      { expression: "window.outerHeight - window.innerHeight", returnByValue: true },
      sessionId
    )
  )
  return Math.max(0, result.value ?? 0)
}

/**
 * Sets the viewport of every window (of the context's pages when one is
 * named; windows opened later take the last size) to `width` x `height` CSS
 * pixels.
 */
export const resize = async (
  client: CdpClient,
  width: number,
  viewportHeight: number,
  frameHeight: number,
  contextId?: string
) => {
  const height = viewportHeight + frameHeight
  const windows = new Set<number>()
  for (const page of await pageTargets(client, contextId)) {
    const { windowId } = await client.send<{ windowId: number }>("Browser.getWindowForTarget", {
      targetId: page.targetId
    })
    windows.add(windowId)
  }
  for (const windowId of windows) {
    await client.send("Browser.setWindowBounds", { windowId, bounds: { windowState: "normal" } })
    await client.send("Browser.setWindowBounds", { windowId, bounds: { width, height } })
  }
}
