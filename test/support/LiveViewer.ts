import { Effect } from "effect"
import WebSocket from "ws"

export interface ReceivedFrame {
  readonly meta: any
  readonly jpeg: Buffer
  /** `performance.now()` when the JPEG arrived. */
  readonly at: number
}

export interface Tab {
  readonly id: string
  readonly url: string
  readonly title: string
  readonly active: boolean
}

/** A live-view client as a dashboard would be one: the hello, frames (meta then JPEG), tabs, errors, the close. */
export interface LiveViewer {
  readonly hello: Promise<any>
  readonly frames: Array<ReceivedFrame>
  /** Every `tabs` message's list, in order. */
  readonly tabs: Array<ReadonlyArray<Tab>>
  /** Every `clipboard` message, in order. */
  readonly clipboards: Array<{ readonly text: string; readonly truncated: boolean }>
  readonly errors: Array<any>
  readonly closed: Promise<{ readonly code: number; readonly reason: string }>
  readonly send: (message: unknown) => void
  /** Waits until `count` frames (in all) have arrived. */
  readonly frame: (count: number, timeoutMs?: number) => Effect.Effect<ReceivedFrame>
  /** Waits until `count` error messages (in all) have arrived. */
  readonly error: (count: number, timeoutMs?: number) => Effect.Effect<any>
  /** Waits until `count` clipboard messages (in all) have arrived. */
  readonly clipboard: (
    count: number,
    timeoutMs?: number
  ) => Effect.Effect<{ readonly text: string; readonly truncated: boolean }>
  /** Waits until the latest tabs message satisfies `check`, and gives it. */
  readonly tabsWhere: (
    what: string,
    check: (tabs: ReadonlyArray<Tab>) => boolean,
    timeoutMs?: number
  ) => Effect.Effect<ReadonlyArray<Tab>>
  /** Waits until the latest frame's page matches `pattern`, and gives that frame. */
  readonly frameOf: (pattern: RegExp, timeoutMs?: number) => Effect.Effect<ReceivedFrame>
}

const until = <A>(what: string | (() => string), read: () => A | undefined, timeoutMs: number) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    while (true) {
      const value = read()
      if (value !== undefined) return value
      if (Date.now() > deadline)
        return yield* Effect.die(
          new Error(`timed out waiting for ${typeof what === "string" ? what : what()}`)
        )
      yield* Effect.sleep("10 millis")
    }
  })

/** Opens the stream at `url` (a preview token's `url`); closed with the scope. */
export const open = (url: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const ws = new WebSocket(url, { perMessageDeflate: false })
      const frames: Array<ReceivedFrame> = []
      const errors: Array<any> = []
      const tabs: Array<ReadonlyArray<Tab>> = []
      const clipboards: Array<{ text: string; truncated: boolean }> = []
      let meta: any
      let helloSeen: (value: any) => void = () => {}
      const hello = new Promise<any>((resolve) => (helloSeen = resolve))
      const closed = new Promise<{ code: number; reason: string }>((resolve) =>
        ws.on("close", (code, reason) => resolve({ code, reason: reason.toString("utf8") }))
      )
      ws.on("error", () => undefined)
      ws.on("message", (data: Buffer, isBinary) => {
        if (isBinary) {
          frames.push({ meta, jpeg: data, at: performance.now() })
          return
        }
        const message = JSON.parse(data.toString("utf8"))
        if (message.type === "hello") helloSeen(message)
        else if (message.type === "frame") meta = message
        else if (message.type === "error") errors.push(message)
        else if (message.type === "tabs") tabs.push(message.tabs)
        else if (message.type === "clipboard")
          clipboards.push({ text: message.text, truncated: message.truncated })
      })
      const viewer: LiveViewer = {
        hello,
        frames,
        tabs,
        clipboards,
        errors,
        closed,
        send: (message) => ws.send(typeof message === "string" ? message : JSON.stringify(message)),
        frame: (count, timeoutMs = 15_000) => until(`frame ${count}`, () => frames[count - 1], timeoutMs),
        error: (count, timeoutMs = 15_000) => until(`error ${count}`, () => errors[count - 1], timeoutMs),
        clipboard: (count, timeoutMs = 15_000) =>
          until(`clipboard ${count}`, () => clipboards[count - 1], timeoutMs),
        tabsWhere: (what, check, timeoutMs = 15_000) =>
          until(
            () => `tabs: ${what} (the last: ${JSON.stringify(tabs.at(-1))})`,
            () => {
              const last = tabs.at(-1)
              return last !== undefined && check(last) ? last : undefined
            },
            timeoutMs
          ),
        frameOf: (pattern, timeoutMs = 15_000) =>
          until(
            () => `a frame of ${pattern} (the last of ${frames.at(-1)?.meta.url})`,
            () => {
              const last = frames.at(-1)
              return last !== undefined && pattern.test(last.meta.url) ? last : undefined
            },
            timeoutMs
          )
      }
      return { ws, viewer }
    }),
    ({ ws }) => Effect.sync(() => ws.terminate())
  ).pipe(
    Effect.tap(({ viewer }) =>
      Effect.promise(() => Promise.race([viewer.hello, viewer.closed])).pipe(
        Effect.timeout("15 seconds"),
        Effect.flatMap((first) =>
          first.type === "hello"
            ? Effect.void
            : Effect.die(new Error(`stream closed: ${JSON.stringify(first)}`))
        ),
        Effect.orDie
      )
    ),
    Effect.map(({ viewer }) => viewer)
  )

/** The HTTP answer to an upgrade the service refuses (status and JSON body), or 101. */
export const refusal = (url: string, headers: Record<string, string> = {}) =>
  Effect.promise(
    () =>
      new Promise<{ readonly status: number; readonly body: any }>((resolve) => {
        const ws = new WebSocket(url, { headers })
        ws.on("unexpected-response", (_request, response) => {
          let body = ""
          response.on("data", (chunk) => (body += chunk))
          response.on("end", () => {
            resolve({ status: response.statusCode ?? 0, body: body === "" ? null : JSON.parse(body) })
            ws.terminate()
          })
        })
        ws.on("open", () => {
          resolve({ status: 101, body: null })
          ws.close()
        })
        ws.on("error", () => undefined)
      })
  )
