import { Effect, Result } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Crypto from "node:crypto"
import type WebSocket from "ws"
import { RAW } from "../guard/RawRoutes.ts"
import { Audit } from "../../features/audit/Audit.ts"
import { CurrentOrigin } from "../../features/policy/AuthMiddleware.ts"
import { originOf } from "../guard/Authenticator.ts"
import { accept, isWebSocketUpgrade } from "./Ends.ts"
import { hangUp } from "../../platform/net/WebSocketEnds.ts"
import { PublicUrls } from "../../platform/config/Config.ts"
import { InvalidField, InvalidRequest } from "../../kernel/Errors.ts"
import { TERMINAL_LIMITS } from "../../kernel/Session.ts"
import { ProcessLimitReached } from "../../kernel/SandboxErrors.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import { callerRaw, urlOrigin } from "../guard/RawAuth.ts"
import { RateLimitReport, rateLimitHeaders } from "../../features/limits/RateLimitReport.ts"
import { Policy } from "../guard/Policy.ts"
import { INTERNAL_PREFIX, type Here, SessionDoor } from "./SessionDoor.ts"
import { commandsStarted } from "../../features/sessions/Exec.ts"
import { Metric } from "effect"

/** The shell a terminal runs: bash as a login shell where the image has it, else sh. */
export const SHELL = [
  "/bin/sh",
  "-c",
  "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"
]

/** Output queued towards a slow viewer before the shell's output stops being read (and the shell blocks). */
const HIGH_WATER = 4 * 1024 * 1024
/** Keystrokes the shell has not read yet before the client's socket stops being read. */
const INPUT_HIGH_WATER = 1024 * 1024

const ACCESS = RAW.pty.access

const sizeOf = (request: HttpServerRequest.HttpServerRequest, fallback: { cols: number; rows: number }) => {
  const query = new URL(request.url, "http://pty").searchParams
  const read = (name: "cols" | "rows") => {
    const text = query.get(name)
    if (text === null) return fallback[name]
    const value = Number(text)
    const { minimum, maximum } = TERMINAL_LIMITS[name]
    return Number.isInteger(value) && value >= minimum && value <= maximum ? value : undefined
  }
  const cols = read("cols")
  const rows = read("rows")
  if (cols === undefined) return new InvalidField({ field: "cols" })
  if (rows === undefined) return new InvalidField({ field: "rows" })
  return { cols, rows }
}

/**
 * A terminal on the node that runs the sandbox: a login shell in a real PTY
 * (through the supervisor), its output sent as binary frames, the client's
 * frames (binary or text) written to it as keystrokes. The first frame is a
 * text frame `{"type":"hello","pty":..., "cols", "rows"}`; when the shell
 * exits a text frame `{"type":"exit","exit_code","signal"}` and close 1000;
 * when the session ends, close 1000 with the reason. Closing the socket
 * ends the shell and its process group. Resize with `POST .../resize`.
 */
const terminal: Here<"pty", InvalidField | InvalidRequest | ProcessLimitReached, Audit> = (
  request,
  connection,
  owner
) =>
  Effect.gen(function* () {
    if (!isWebSocketUpgrade(request)) return yield* new InvalidRequest()
    const terminals = connection.runtime.pty
    const size = sizeOf(request, terminals.size())
    if (size instanceof InvalidField) return yield* size
    // Output before the client's socket is open waits here.
    let ws: WebSocket | undefined
    const early: Array<Buffer> = []
    let paused = false
    let inputPaused = false
    const shell = yield* terminals
      .spawn({ argv: SHELL, cwd: "/root", pty: size }, (_, data) => {
        if (ws === undefined) early.push(Buffer.from(data))
        else ws.send(data, { binary: true })
      })
      .pipe(
        Effect.catchTag("SupervisorError", (error) =>
          Effect.fail(error.message.startsWith("fork: ") ? new ProcessLimitReached() : new InvalidRequest())
        )
      )
    yield* Metric.update(commandsStarted, 1)
    // Audited where the shell starts, as whom the request came from (vouched for through the hop).
    yield* (yield* Audit).record(owner, {
      action: "pty.opened",
      targetType: "session",
      targetId: connection.sessionId
    })
    const client = yield* accept(request).pipe(Effect.option)
    if (client._tag === "None") {
      shell.hangUp()
      return HttpServerResponse.empty({ status: 400 })
    }
    const socket = client.value.ws
    ws = socket
    const id = `pty_${Crypto.randomUUID()}`
    socket.send(JSON.stringify({ type: "hello", pty: id, ...size }))
    for (const data of early.splice(0)) socket.send(data, { binary: true })
    const release = terminals.onResize((cols, rows) => shell.resize(cols, rows))
    // A slow client holds the shell back instead of filling the service's memory.
    const watch = setInterval(() => {
      if (!paused && socket.bufferedAmount > HIGH_WATER) {
        paused = true
        shell.pause()
      } else if (paused && socket.bufferedAmount < HIGH_WATER / 4) {
        paused = false
        shell.resume()
      }
      // A client typing (or pasting) faster than the shell reads waits on its own socket.
      const unread = shell.stdinUnread()
      if (!inputPaused && unread > INPUT_HIGH_WATER) {
        inputPaused = true
        socket.pause()
      } else if (inputPaused && unread < INPUT_HIGH_WATER / 4) {
        inputPaused = false
        socket.resume()
      }
    }, 20)
    socket.on("message", (data, isBinary) => {
      const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer)
      shell.write(isBinary ? bytes : Buffer.from(bytes.toString("utf8")))
    })
    const closed = Effect.callback<void>((resume) => {
      if (socket.readyState >= socket.CLOSING) return resume(Effect.void)
      socket.once("close", () => resume(Effect.void))
    })
    const outcome = yield* Effect.raceAll([
      Effect.map(closed, () => ({ _tag: "ClientGone" as const })),
      Effect.map(shell.exited, (exit) => ({ _tag: "Exited" as const, exit })),
      Effect.map(connection.ended, (reason) => ({ _tag: "SessionEnded" as const, reason }))
    ]).pipe(
      Effect.ensuring(
        Effect.sync(() => {
          clearInterval(watch)
          release()
          shell.hangUp()
        })
      )
    )
    if (outcome._tag === "Exited") {
      socket.send(JSON.stringify({ type: "exit", exit_code: outcome.exit.code, signal: outcome.exit.signal }))
      yield* hangUp(socket, 1000, "exited")
    } else if (outcome._tag === "SessionEnded") {
      yield* hangUp(socket, 1000, `session ended: ${outcome.reason}`)
    }
    return HttpServerResponse.empty({ status: 101 })
  })

/**
 * `GET /v1/sessions/:id/pty` (WebSocket): authenticated like the CDP relay
 * (key in the header or `?token=`, or the dashboard cookie from this
 * service's own pages), requires `exec.write`, spends the caller's exec
 * budget, is audited (`pty.opened`), and reaches the sandbox through the
 * session door. `?cols=&rows=` size it (default: the last resize, 80x24).
 */
export const layer = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const door = yield* SessionDoor
    const policy = yield* Policy
    const publicOrigin = urlOrigin((yield* PublicUrls).publicUrl)

    const handler = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const id = (yield* HttpRouter.params).id ?? ""
        const owner = yield* callerRaw(request, publicOrigin, true)
        const report = { current: undefined as Parameters<typeof rateLimitHeaders>[0] | undefined }
        // The access checked, and a refusal (403, the budget, the session's 404 or 409) audited as a
        // route's is, under `pty.opened`; the success is the terminal's own record.
        const opened = yield* policy
          .admit(
            owner,
            ACCESS,
            id,
            Effect.andThen(
              policy.spend(owner, RAW.pty.limit, id).pipe(Effect.provideService(RateLimitReport, report)),
              door.serve(request, { owner, id, kind: "pty" }, terminal)
            )
          )
          .pipe(Effect.result)
        if (Result.isFailure(opened)) {
          return errorResponse(
            opened.failure,
            report.current === undefined ? {} : rateLimitHeaders(report.current)
          )
        }
        return opened.success
      }).pipe(
        Effect.provideService(CurrentOrigin, originOf(request)),
        Effect.catch((error) => Effect.succeed(errorResponse(error)))
      )

    yield* router.add("GET", "/v1/sessions/:id/pty", handler)
    yield* router.add("GET", `${INTERNAL_PREFIX}/v1/sessions/:id/pty`, door.internal("pty", terminal))
  })
)
