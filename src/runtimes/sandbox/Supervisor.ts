import { Deferred, Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import { encode, type Frame, FrameReader, MAX_FRAME, spawnFields } from "./Frames.ts"
import type { FileChange } from "../../runtime/Exec.ts"
import { SupervisorError } from "../../runtime/SupervisorError.ts"
import * as SupervisorFiles from "./SupervisorFiles.ts"
import * as SupervisorProcess from "./SupervisorProcess.ts"
import type { ExitStatus, OutputListener, Process, SpawnRequest } from "./SupervisorProcess.ts"

export { SupervisorError } from "../../runtime/SupervisorError.ts"
export type { ExitStatus, OutputListener, Process, SpawnRequest } from "./SupervisorProcess.ts"

/** An operation waiting for an idle connection. */
interface Waiter {
  readonly give: (socket: Net.Socket) => void
  readonly fail: () => void
}

/** Idle connections kept from a sandbox's control socket (its supervisor keeps 4 spares). */
const MAX_IDLE = 16

/**
 * The service's end of one sandbox's supervisor: it listens on the sandbox's
 * control socket, where the supervisor keeps a few idle connections open;
 * each operation takes one. The first connection is the lifeline, held open
 * and never used: when it closes, the supervisor (and so the sandbox) is gone.
 * Operations are Effects failing with `SupervisorError`; one whose fiber is
 * interrupted gives up its place in the queue, or closes the connection it
 * took (the supervisor then drops what it started for it).
 */
export class SupervisorLink {
  private readonly idle: Array<Net.Socket> = []
  private readonly waiting: Array<Waiter> = []
  private lifeline: Net.Socket | undefined
  private closed = false
  /** Done once the supervisor has connected. */
  readonly ready = Deferred.makeUnsafe<void>()
  /** Done when the supervisor (and so the sandbox) is gone, or the link is closed. */
  readonly dead = Deferred.makeUnsafe<void>()
  private readonly server: Net.Server

  private constructor(server: Net.Server) {
    this.server = server
    server.on("connection", (socket) => this.accept(socket))
  }

  /** Listens on `path` (owned by the sandbox's root, `hostUid`, so its supervisor may connect). */
  static listen(path: string, hostUid: number): Effect.Effect<SupervisorLink, SupervisorError> {
    return Effect.tryPromise({
      try: async () => {
        const server = Net.createServer()
        await new Promise<void>((resolve, reject) => {
          server.once("error", reject)
          server.listen(path, () => resolve())
        })
        await Fs.chown(path, hostUid, hostUid)
        await Fs.chmod(path, 0o600)
        return new SupervisorLink(server)
      },
      catch: (cause) => new SupervisorError({ message: `cannot listen on ${path}`, cause })
    })
  }

  private accept(socket: Net.Socket) {
    if (this.closed) return socket.destroy()
    // The supervisor keeps a few spares; any process of the sandbox may connect too: past the bound,
    // a connection nobody waits for is closed as it comes, so the sandbox holds none of the service's.
    if (this.lifeline !== undefined && this.waiting.length === 0 && this.idle.length >= MAX_IDLE)
      return socket.destroy()
    socket.setNoDelay(true)
    if (this.lifeline === undefined) {
      this.lifeline = socket
      socket.write(encode("L"))
      socket.on("error", () => undefined)
      socket.on("close", () => this.die())
      Deferred.doneUnsafe(this.ready, Effect.void)
      return
    }
    const forget = () => {
      const at = this.idle.indexOf(socket)
      if (at >= 0) this.idle.splice(at, 1)
    }
    socket.once("close", forget)
    socket.on("error", () => undefined)
    const waiter = this.waiting.shift()
    if (waiter !== undefined) {
      socket.off("close", forget)
      return waiter.give(socket)
    }
    this.idle.push(socket)
  }

  private die() {
    Deferred.doneUnsafe(this.dead, Effect.void)
    for (const waiter of this.waiting.splice(0)) waiter.fail()
  }

  /** An idle connection for one operation (waiting for one if none is); fails once the sandbox is gone. */
  private readonly take: Effect.Effect<Net.Socket, SupervisorError> = Effect.callback((resume) => {
    if (this.closed) return resume(Effect.fail(SupervisorError.ended()))
    for (let socket = this.idle.shift(); socket !== undefined; socket = this.idle.shift()) {
      if (!socket.destroyed) {
        socket.removeAllListeners("close")
        return resume(Effect.succeed(socket))
      }
    }
    if (Deferred.isDoneUnsafe(this.dead)) return resume(Effect.fail(SupervisorError.ended()))
    const waiter: Waiter = {
      give: (socket) => resume(Effect.succeed(socket)),
      fail: () => resume(Effect.fail(SupervisorError.ended()))
    }
    this.waiting.push(waiter)
    return Effect.sync(() => {
      const at = this.waiting.indexOf(waiter)
      if (at >= 0) this.waiting.splice(at, 1)
    })
  })

  /** `use` on a connection of its own; interrupted while it runs, the connection is closed. */
  private withConnection<A>(
    use: (socket: Net.Socket) => Effect.Effect<A, SupervisorError>
  ): Effect.Effect<A, SupervisorError> {
    return Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(restore(this.take), (socket) =>
        restore(use(socket)).pipe(Effect.onInterrupt(() => Effect.sync(() => socket.destroy())))
      )
    )
  }

  close() {
    this.closed = true
    for (const socket of this.idle.splice(0)) socket.destroy()
    this.lifeline?.destroy()
    this.server.close()
    this.die()
  }

  /** One request, then frames until `done` says the answer is whole. */
  private exchange(
    request: Buffer,
    done: (frame: Frame) => boolean
  ): Effect.Effect<Array<Frame>, SupervisorError> {
    return this.withConnection((socket) =>
      Effect.callback((resume) => {
        const reader = new FrameReader()
        const frames: Array<Frame> = []
        socket.on("data", (chunk: Buffer) => {
          for (const frame of reader.push(chunk)) {
            frames.push(frame)
            if (frame.type === "E") {
              socket.destroy()
              return resume(Effect.fail(new SupervisorError({ message: frame.payload.toString() })))
            }
            if (done(frame)) {
              socket.destroy()
              return resume(Effect.succeed(frames))
            }
          }
        })
        socket.once("close", () => resume(Effect.fail(SupervisorError.ended())))
        socket.write(request)
      })
    )
  }

  version(): Effect.Effect<string, SupervisorError> {
    return Effect.map(
      this.exchange(encode("V"), (frame) => frame.type === "V"),
      ([answer]) => answer!.payload.toString()
    )
  }

  /**
   * Starts a process; `listener` gets its output from the first byte, and
   * `onExit` (when it started) its end, as soon as it is known.
   */
  spawn(
    request: SpawnRequest,
    listener: OutputListener,
    onExit?: (status: ExitStatus) => void
  ): Effect.Effect<Process, SupervisorError> {
    return Effect.suspend(() => {
      // Checked before a connection is taken: a request that cannot be sent must not hold one. The
      // exec limits keep every request well below it.
      const fields = spawnFields(request)
      if (fields.length > MAX_FRAME)
        return Effect.die(new RangeError(`a spawn request of ${fields.length} bytes`))
      return this.withConnection((socket) => SupervisorProcess.spawn(socket, fields, listener, onExit))
    })
  }

  /** A regular file's size and mode, then its bytes. */
  readFile(
    path: string
  ): Effect.Effect<
    { readonly size: number; readonly mode: number; readonly body: ReadableStream<Uint8Array> },
    SupervisorError
  > {
    return this.withConnection((socket) => SupervisorFiles.readFile(socket, path))
  }

  /**
   * Writes `chunks` to `path` (parents made as needed) through a temporary
   * file renamed into place: a transfer cut short leaves nothing. Succeeds
   * with the bytes written.
   */
  writeFile(
    path: string,
    mode: number,
    chunks: AsyncIterable<Uint8Array>
  ): Effect.Effect<number, SupervisorError> {
    return this.withConnection((socket) => SupervisorFiles.writeFile(socket, path, mode, chunks))
  }

  list(path: string, after: string, limit: number) {
    return this.withConnection((socket) => SupervisorFiles.list(socket, path, after, limit))
  }

  stat(path: string) {
    return this.withConnection((socket) => SupervisorFiles.stat(socket, path))
  }

  mkdir(path: string, parents: boolean) {
    return this.withConnection((socket) => SupervisorFiles.mkdir(socket, path, parents))
  }

  move(from: string, to: string, overwrite: boolean) {
    return this.withConnection((socket) => SupervisorFiles.move(socket, from, to, overwrite))
  }

  remove(path: string, recursive: boolean) {
    return this.withConnection((socket) => SupervisorFiles.remove(socket, path, recursive))
  }

  /** Follows directory `path`; its connection is held until the watch ends. */
  watch(path: string, recursive: boolean, onChange: (change: FileChange) => void, onEnd: () => void) {
    return this.withConnection((socket) => SupervisorFiles.watch(socket, path, recursive, onChange, onEnd))
  }

  /** A connection to 127.0.0.1:`port` inside the sandbox: raw bytes both ways. */
  dial(port: number): Effect.Effect<Net.Socket, SupervisorError> {
    return this.withConnection((socket) =>
      Effect.callback((resume) => {
        const reader = new FrameReader()
        const onData = (chunk: Buffer) => {
          const [frame] = reader.push(chunk, () => true)
          if (frame === undefined) return
          // Paused before the listener goes: the caller's own reading starts where this one stopped.
          socket.pause()
          socket.off("data", onData)
          socket.off("close", onClose)
          if (frame.type !== "Y") {
            socket.destroy()
            return resume(Effect.fail(new SupervisorError({ message: frame.payload.toString() })))
          }
          const rest = reader.rest()
          if (rest.length > 0) socket.unshift(rest)
          resume(Effect.succeed(socket))
        }
        const onClose = () => resume(Effect.fail(SupervisorError.ended()))
        socket.on("data", onData)
        socket.once("close", onClose)
        socket.write(encode("T", String(port)))
      })
    )
  }
}
