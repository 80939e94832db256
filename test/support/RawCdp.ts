import { Effect } from "effect"
import WebSocket from "ws"

/**
 * A CDP connection a hostile client would hold: any bytes, as text or binary
 * frames, and the answers read as they come (ids, events, id-less errors).
 */
export interface RawCdp {
  /** Sends `frame` as it is. */
  readonly send: (frame: string | Buffer, binary?: boolean) => void
  /**
   * The first message with this `id` not yet taken (`undefined`: the next without one that is not an
   * event, as Chromium and the guard answer a frame they cannot read), taken.
   */
  readonly answerTo: (id: number | undefined, timeoutMs?: number) => Effect.Effect<any>
  /** A JSON command, and its answer. */
  readonly call: (id: number, method: string, params?: object, sessionId?: string) => Effect.Effect<any>
  /** Every message so far. */
  readonly messages: () => ReadonlyArray<any>
  readonly closed: () => boolean
}

/** Connects to `url` (a session's `cdp_url`, or a browser's DevTools endpoint), closed with the scope. */
export const connect = (url: string, headers: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<WebSocket>((resolve, reject) => {
          const socket = new WebSocket(url, {
            headers,
            perMessageDeflate: false,
            maxPayload: 512 * 1024 * 1024
          })
          socket.once("open", () => resolve(socket))
          socket.once("error", reject)
        })
    ),
    (socket) => Effect.sync(() => socket.terminate())
  ).pipe(
    Effect.map((socket): RawCdp => {
      const received: Array<any> = []
      /** What no `answerTo` has taken yet. */
      const untaken: Array<any> = []
      const waiters = new Set<(message: any) => boolean>()
      socket.on("message", (data: Buffer) => {
        let message: any
        try {
          message = JSON.parse(data.toString())
        } catch {
          message = { unparsed: data.toString() }
        }
        received.push(message)
        for (const waiter of waiters) {
          if (waiter(message)) {
            waiters.delete(waiter)
            return
          }
        }
        untaken.push(message)
      })
      const matches = (id: number | undefined) => (message: any) =>
        id === undefined ? message.id === undefined && message.method === undefined : message.id === id
      const answerTo = (id: number | undefined, timeoutMs = 10_000) =>
        Effect.promise(
          () =>
            new Promise<any>((resolve) => {
              const index = untaken.findIndex(matches(id))
              if (index >= 0) return resolve(untaken.splice(index, 1)[0])
              const timer = setTimeout(() => {
                waiters.delete(waiter)
                resolve({ timedOut: true, id })
              }, timeoutMs)
              const waiter = (message: any) => {
                if (!matches(id)(message)) return false
                clearTimeout(timer)
                resolve(message)
                return true
              }
              waiters.add(waiter)
              socket.once("close", () => {
                if (!waiters.delete(waiter)) return
                clearTimeout(timer)
                resolve({ closed: true, id })
              })
            })
        )
      const send = (frame: string | Buffer, binary = false) => socket.send(frame, { binary })
      return {
        send,
        answerTo,
        call: (id, method, params = {}, sessionId) => {
          send(
            JSON.stringify(
              sessionId === undefined ? { id, method, params } : { id, method, params, sessionId }
            )
          )
          return answerTo(id)
        },
        messages: () => received,
        closed: () => socket.readyState !== WebSocket.OPEN
      }
    })
  )

/**
 * A CBOR encoding of a flat CDP command, in Chromium's envelope (tag 24,
 * byte string of the map): what Chromium's DevTools reads from a binary frame.
 */
export const cbor = (message: Record<string, unknown>) => {
  const head = (major: number, length: number) =>
    length < 24
      ? Buffer.from([(major << 5) | length])
      : length < 256
        ? Buffer.from([(major << 5) | 24, length])
        : Buffer.from([(major << 5) | 25, length >> 8, length & 0xff])
  const text = (value: string) => {
    const bytes = Buffer.from(value, "utf8")
    return Buffer.concat([head(3, bytes.length), bytes])
  }
  const value = (item: unknown): Buffer => {
    if (typeof item === "string") return text(item)
    if (typeof item === "number") return head(0, item)
    const entries = Object.entries(item as Record<string, unknown>)
    // An indefinite-length map, as Chromium writes its own.
    return Buffer.concat([
      Buffer.from([0xbf]),
      ...entries.flatMap(([key, inner]) => [text(key), value(inner)]),
      Buffer.from([0xff])
    ])
  }
  const map = value(message)
  const size = Buffer.alloc(4)
  size.writeUInt32BE(map.length)
  return Buffer.concat([Buffer.from([0xd8, 0x5a]), size, map])
}
