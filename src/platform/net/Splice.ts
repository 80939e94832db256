import { Effect } from "effect"
import WebSocket from "ws"
import { type End, hangUp } from "./WebSocketEnds.ts"

// Two `ws` sockets joined (see WebSocketEnds.ts): the CDP relay's, the live
// view's and the PTY's, through the node hop too.

/** Bytes queued towards a slow reader before the other side stops being read. */
const HIGH_WATER = 8 * 1024 * 1024

/** A client's CDP command as an inspector read and checked it. */
export interface Command {
  readonly id: number
  readonly method: string
  readonly params?: Record<string, unknown>
  readonly sessionId?: string
}

/**
 * What becomes of a client's frame: the command it held, checked, sent on
 * written anew (never the client's bytes); or answered here (and, at the
 * inspector's asking, the splice ended), `refused` saying why when it was.
 */
export type Verdict =
  | { readonly _tag: "Send"; readonly command: Command }
  | {
      readonly _tag: "Answer"
      readonly reply: string
      readonly hangUp: boolean
      readonly refused?: string | undefined
    }

/** A frame to send, and which way. */
export interface Send {
  readonly to: "client" | "upstream"
  readonly frame: string | Buffer
}

/**
 * What a scoped splice routes both directions through: it may answer, drop,
 * rewrite or add frames (a context session's view of a shared browser).
 */
export interface FrameScope {
  /** What is sent upstream before anything of the client's. */
  readonly open: () => ReadonlyArray<Send>
  /** A command from the client, as the inspector read and checked it. */
  readonly fromClient: (command: Command) => ReadonlyArray<Send>
  /** A frame from the upstream. */
  readonly fromUpstream: (frame: string | Buffer) => ReadonlyArray<Send>
  /**
   * Why the scope has ended the connection, once it has (a page client's
   * page went away): asked after each frame, whose sends go first.
   */
  readonly ended?: () => string | undefined
}

/** How a splice ended. */
export type Outcome =
  /** The upstream end closed, with the code and reason it gave (1006: none). */
  | { readonly _tag: "UpstreamGone"; readonly code: number; readonly reason: string }
  /** The inspector answered a frame and asked to hang up (`Browser.close`). */
  | { readonly _tag: "HangUpRequested" }
  /** The scope ended the connection, and says why. */
  | { readonly _tag: "ScopeEnded"; readonly reason: string }
  | { readonly _tag: "ClientGone" }

/**
 * Sends `data` on `to`. When `to` has more than HIGH_WATER bytes queued,
 * `from` is not read until this frame is written.
 */
const forward = (from: End, to: End, data: Buffer | string, binary: boolean) => {
  if (to.ws.readyState !== WebSocket.OPEN) return
  if (to.ws.bufferedAmount < HIGH_WATER) return to.ws.send(data, { binary })
  from.ws.pause()
  to.ws.send(data, { binary }, () => from.ws.resume())
}

/**
 * Frames that arrive together leave together: `ws` handles each chunk read
 * from `from`'s connection at once, frame by frame, and `to` is corked around
 * it, so the frames of one read go out in one write instead of one each.
 */
const batchWrites = (from: End, to: End) => {
  const cork = () => to.socket.cork()
  const uncork = () => to.socket.uncork()
  from.socket.prependListener("data", cork)
  from.socket.on("data", uncork)
  return () => {
    from.socket.off("data", cork)
    from.socket.off("data", uncork)
  }
}

/** What a splice's frame handlers may do: send either way, or end the splice at the client's asking. */
interface Io {
  readonly toClient: (data: Buffer | string, binary: boolean) => void
  readonly toUpstream: (data: Buffer | string, binary: boolean) => void
  readonly hangUp: () => void
  /** Ends the splice at the scope's asking. */
  readonly end: (reason: string) => void
}

interface Handlers {
  readonly fromClient: (data: Buffer, isBinary: boolean) => void
  readonly fromUpstream: (data: Buffer, isBinary: boolean) => void
  /** Sent once both ends are open, before any frame. */
  readonly open?: () => void
}

/**
 * Joins the client's and the upstream's sockets until one side goes, each
 * frame through `handlers` (made with the splice's `Io`). One ordered stream
 * per direction: both puppeteer and playwright break if an event overtakes
 * the response of the command that caused it.
 */
const join = (client: End, upstream: End, handlers: (io: Io) => Handlers) =>
  Effect.callback<Outcome>((resume) => {
    let settled = false
    const io: Io = {
      toClient: (data, binary) => forward(upstream, client, data, binary),
      toUpstream: (data, binary) => forward(client, upstream, data, binary),
      hangUp: () => settle({ _tag: "HangUpRequested" }),
      end: (reason) => settle({ _tag: "ScopeEnded", reason })
    }
    const handle = handlers(io)
    const fromUpstream = (data: Buffer, isBinary: boolean) => handle.fromUpstream(data, isBinary)
    const fromClient = (data: Buffer, isBinary: boolean) => {
      if (!settled) handle.fromClient(data, isBinary)
    }
    const upstreamGone = (code: number, reason: Buffer) =>
      settle({ _tag: "UpstreamGone", code, reason: reason.toString("utf8") })
    const clientGone = () => settle({ _tag: "ClientGone" })
    const unbatch = [batchWrites(upstream, client), batchWrites(client, upstream)]
    const detach = () => {
      for (const undo of unbatch) undo()
      upstream.ws.off("message", fromUpstream)
      upstream.ws.off("close", upstreamGone)
      client.ws.off("message", fromClient)
      client.ws.off("close", clientGone)
      upstream.ws.resume()
      client.ws.resume()
    }
    function settle(outcome: Outcome) {
      if (settled) return
      settled = true
      detach()
      resume(Effect.succeed(outcome))
    }
    upstream.ws.on("message", fromUpstream)
    upstream.ws.once("close", upstreamGone)
    client.ws.on("message", fromClient)
    client.ws.once("close", clientGone)
    // A socket error is followed by its close event.
    upstream.ws.on("error", () => undefined)
    client.ws.on("error", () => undefined)
    if (upstream.ws.readyState !== WebSocket.OPEN) settle({ _tag: "UpstreamGone", code: 1006, reason: "" })
    else if (client.ws.readyState !== WebSocket.OPEN) clientGone()
    else handle.open?.()
    return Effect.sync(detach)
  })

/** Reads a client's frame (`binary`: it came as a binary frame) into its verdict. */
export type Inspector = (frame: Buffer, binary: boolean) => Verdict

/** The inspector's verdict on a client frame carried out: its command sent on (`send`), or answered. */
const guarded = (io: Io, verdict: Verdict, send: (command: Command) => void) => {
  if (verdict._tag === "Send") return send(verdict.command)
  io.toClient(verdict.reply, false)
  if (verdict.hangUp) io.hangUp()
}

/**
 * Splices the client's and the upstream's sockets until one side goes. The
 * client's frames pass `inspect` when given (and only the commands it
 * checked go on, written anew); the upstream's pass untouched.
 */
export const splice = (client: End, upstream: End, inspect?: Inspector) =>
  join(client, upstream, (io) => ({
    fromUpstream: io.toClient,
    fromClient: (data, isBinary) =>
      inspect === undefined
        ? io.toUpstream(data, isBinary)
        : guarded(io, inspect(data, isBinary), (command) => io.toUpstream(JSON.stringify(command), false))
  }))

/**
 * `splice` through a `FrameScope` (a context session's): both directions
 * pass the scope (the client's commands after `inspect`), which may answer,
 * drop, rewrite or add frames, or end the splice; its own opening goes
 * upstream first.
 */
export const spliceScoped = (client: End, upstream: End, scope: FrameScope, inspect: Inspector) =>
  join(client, upstream, (io) => {
    const route = (sends: ReadonlyArray<Send>) => {
      for (const send of sends) (send.to === "client" ? io.toClient : io.toUpstream)(send.frame, false)
      const ended = scope.ended?.()
      if (ended !== undefined) io.end(ended)
    }
    return {
      open: () => route(scope.open()),
      fromUpstream: (data) => route(scope.fromUpstream(data)),
      fromClient: (data, isBinary) =>
        guarded(io, inspect(data, isBinary), (command) => route(scope.fromClient(command)))
    }
  })

/**
 * A client to a session on another node, through the hop: the owner does the
 * session's work (guards CDP frames, counts the lease, serves the live view);
 * this node passes frames both ways and the owner's close frame (code and
 * reason) on to the client.
 */
export const relayToNode = (client: End, upstream: End) =>
  Effect.gen(function* () {
    const outcome = yield* splice(client, upstream)
    if (outcome._tag !== "UpstreamGone") return yield* hangUp(client.ws, 1000, "")
    const told = outcome.code !== 1005 && outcome.code !== 1006
    return yield* hangUp(
      client.ws,
      told ? outcome.code : 1011,
      told ? outcome.reason : "the session's node disconnected"
    )
  })
