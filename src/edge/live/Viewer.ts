import { Clock, Duration, Effect, Metric, Option, Queue, Result, type Scope } from "effect"
import WebSocket from "ws"
import { type End, hangUp, waitClosed } from "../../platform/net/WebSocketEnds.ts"
import type { PreviewClaims } from "../../features/sessions/PreviewTokens.ts"
import type { BrowserRuntime } from "../../runtime/SessionRuntime.ts"
import type { SessionConnection } from "../../features/sessions/SessionConnections.ts"
import { CLIPBOARD_MAX, parse } from "../../runtime/InputEvents.ts"
import {
  frameBytesSent,
  framesSent,
  inputMessages,
  viewersOpen
} from "../../runtimes/shared/LiveViewMetrics.ts"
import { type Frame, PREVIEW_FPS, type Tabs } from "../../runtime/Frames.ts"

/** Close codes of the live-view stream (documented in OpenAPI and docs/guides/live-view-and-recordings.md). */
export const CLOSE_SESSION_ENDED = 1000
export const CLOSE_TOKEN_EXPIRED = 4001

/** Input messages a viewer may have waiting; beyond, new ones are refused with an error message. */
const INBOX = 64

/**
 * Sends with `write` one at a time (`write` calls `sent` once the socket took
 * it all), keeping only the newest of what comes meanwhile: a viewer that
 * reads slowly skips to the latest instead of queueing.
 */
const newestOnly = <A>(ws: WebSocket, write: (value: A, sent: () => void) => void) => {
  let sending = false
  let waiting: A | undefined
  const send = (value: A): void => {
    if (ws.readyState !== WebSocket.OPEN) return
    if (sending) {
      waiting = value
      return
    }
    sending = true
    write(value, () => {
      sending = false
      const next = waiting
      waiting = undefined
      if (next !== undefined) send(next)
    })
  }
  return send
}

type Outcome =
  | { readonly _tag: "Ended"; readonly reason: string }
  | { readonly _tag: "Expired" }
  | { readonly _tag: "ViewerGone" }

/**
 * One viewer of a session's screencast, on the node that runs it: a `hello`
 * message, the session's pages (a `tabs` message, again at each change), then
 * every frame (a JSON `frame` message, then the JPEG as a binary message) and,
 * while the token allows it, the viewer's input forwarded to the page in
 * order, its switches to another page and its copies answered. A viewer that
 * reads slowly skips frames and page lists rather than queueing them: it
 * always gets the newest one next. The stream ends with a close frame
 * saying why: the session ended (1000, `session ended: <reason>`), the token
 * expired (4001), or the service is stopping (1001).
 */
export const serve = (
  client: End,
  connection: SessionConnection<BrowserRuntime>,
  claims: PreviewClaims
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const context = yield* Effect.context<never>()
    const ws = client.ws
    const count = (result: "forwarded" | "ignored" | "invalid") =>
      Metric.withAttributes(inputMessages, { result }).updateUnsafe(1, context)
    const sendJson = (message: object) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message))
    }
    const refuse = (code: string, message: string) => sendJson({ type: "error", code, message })

    yield* Effect.acquireRelease(Metric.modify(viewersOpen, 1), () => Metric.modify(viewersOpen, -1))
    sendJson({
      type: "hello",
      session_id: connection.sessionId,
      input_enabled: claims.inputEnabled,
      fps: PREVIEW_FPS,
      expires_at: claims.expiresAt.toISOString()
    })

    // The pages first, so the first frame's page is one of them.
    yield* connection.runtime.frames.tabs(newestOnly<Tabs>(ws, (tabs, sent) => ws.send(tabs.text, sent)))
    yield* connection.runtime.frames.subscribe(
      newestOnly<Frame>(ws, (frame, sent) => {
        ws.send(frame.metaText)
        ws.send(frame.jpeg, { binary: true }, () => {
          framesSent.updateUnsafe(1, context)
          frameBytesSent.updateUnsafe(frame.jpeg.length, context)
          sent()
        })
      })
    )
    // A copy's answer is waited on before the next message is read: a viewer that asks again and
    // again without reading fills its own inbox (and is told so), not the node's memory.
    const answer = (message: object) =>
      Effect.callback<void>((resume) => {
        if (ws.readyState !== WebSocket.OPEN) return resume(Effect.void)
        ws.send(JSON.stringify(message), () => resume(Effect.void))
      })

    const inbox = yield* Queue.bounded<string>(INBOX)
    const onMessage = (data: Buffer, isBinary: boolean) => {
      if (isBinary) return refuse("invalid_input", "input messages are JSON text, not binary")
      if (!Queue.offerUnsafe(inbox, data.toString("utf8"))) {
        refuse("input_overflow", `more than ${INBOX} input messages waiting: this one was dropped`)
      }
    }
    ws.on("message", onMessage)
    yield* Effect.addFinalizer(() => Effect.sync(() => ws.off("message", onMessage)))

    const frames = connection.runtime.frames
    const handle = (text: string) =>
      Effect.gen(function* () {
        const parsed = parse(text)
        if (Result.isFailure(parsed)) {
          count("invalid")
          return refuse("invalid_input", parsed.failure.message)
        }
        const request = parsed.success
        if (!claims.inputEnabled) {
          count("ignored")
          // Pointer and keys are dropped quietly; what a viewer waits on is refused aloud.
          if (request._tag !== "Input")
            refuse("input_disabled", "this viewer's token was minted without sessions.write: view only")
          return
        }
        const done = () => Effect.sync(() => count("forwarded"))
        switch (request._tag) {
          case "Input":
          case "Paste":
            return yield* frames.dispatch(request.commands).pipe(
              Effect.tap(done),
              Effect.catchTag("NoPageOnScreen", (error) =>
                Effect.sync(() => refuse("no_page", error.message))
              )
            )
          case "SwitchTab":
            return yield* frames.switchTo(request.id).pipe(
              Effect.tap(done),
              Effect.catchTag("UnknownTab", (error) =>
                Effect.sync(() => refuse("unknown_tab", error.message))
              )
            )
          case "Copy":
            return yield* frames.selection(CLIPBOARD_MAX).pipe(
              Effect.tap(done),
              Effect.flatMap((selection) =>
                answer({ type: "clipboard", text: selection.text, truncated: selection.truncated })
              ),
              Effect.catchTags({
                NoPageOnScreen: (error) => Effect.sync(() => refuse("no_page", error.message)),
                CopyFailed: (error) => Effect.sync(() => refuse("copy_failed", error.message))
              })
            )
        }
      })
    yield* Queue.take(inbox).pipe(Effect.flatMap(handle), Effect.forever, Effect.forkScoped)

    const remaining = claims.expiresAt.getTime() - (yield* Clock.currentTimeMillis)
    const outcome = yield* Effect.raceAll<Effect.Effect<Outcome>>([
      Effect.map(connection.ended, (reason) => ({ _tag: "Ended", reason })),
      Effect.as(Effect.sleep(Duration.millis(Math.max(0, remaining))), { _tag: "Expired" }),
      Effect.as(waitClosed(ws), { _tag: "ViewerGone" })
    ])
    // Frames and input stop before the close frame goes out.
    ws.off("message", onMessage)
    switch (outcome._tag) {
      case "Ended":
        return yield* hangUp(ws, CLOSE_SESSION_ENDED, `session ended: ${outcome.reason}`)
      case "Expired":
        return yield* hangUp(ws, CLOSE_TOKEN_EXPIRED, "preview token expired: mint a new one to resume")
      case "ViewerGone": {
        const ended = yield* connection.endedReason
        return yield* hangUp(
          ws,
          CLOSE_SESSION_ENDED,
          Option.match(ended, { onNone: () => "", onSome: (reason) => `session ended: ${reason}` })
        )
      }
    }
  })
