import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import { encode, encodeChunked, type Frame, FrameReader, MAX_FRAME, spawnFields } from "./Frames.ts"

/** The supervisor refused an operation, or went away during it; the message is its own. */
export class SupervisorError extends Error {
  override readonly name = "SupervisorError"
}

export interface ExitStatus {
  /** The exit code, or null when a signal ended it (or the sandbox went away). */
  readonly code: number | null
  /** The signal that ended it, or null. */
  readonly signal: number | null
}

export interface SpawnRequest {
  readonly argv: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly cwd?: string | undefined
  /** A PTY of this size (one stream of output), instead of pipes. */
  readonly pty?: { readonly cols: number; readonly rows: number } | undefined
}

export type OutputListener = (stream: "stdout" | "stderr", data: Buffer) => void

/** A process running in the sandbox, on its own connection to the supervisor. */
export interface Process {
  readonly pid: number
  /** Resolves when it exits (or its sandbox goes away: code and signal null). */
  readonly exited: Promise<ExitStatus>
  readonly write: (data: Buffer) => void
  readonly closeStdin: () => void
  /** To its whole process group. */
  readonly signal: (signal: number) => void
  readonly resize: (cols: number, rows: number) => void
  /** Stops reading its output until `resume`: the supervisor stops reading its pipes, and it blocks. */
  readonly pause: () => void
  readonly resume: () => void
  /** Hangs up: a process still running is killed with its group. */
  readonly hangUp: () => void
}

/**
 * The service's end of one sandbox's supervisor: it listens on the sandbox's
 * control socket, where the supervisor keeps a few idle connections open;
 * each operation takes one. The first connection is the lifeline, held open
 * and never used: when it closes, the supervisor (and so the sandbox) is gone.
 */
export class SupervisorLink {
  private readonly idle: Array<Net.Socket> = []
  private readonly waiting: Array<(socket: Net.Socket) => void> = []
  private lifeline: Net.Socket | undefined
  private closed = false
  readonly ready: Promise<void>
  readonly dead: Promise<void>
  private markReady!: () => void
  private markDead!: () => void
  private readonly server: Net.Server

  private constructor(server: Net.Server) {
    this.server = server
    this.ready = new Promise((resolve) => (this.markReady = resolve))
    this.dead = new Promise((resolve) => (this.markDead = resolve))
    server.on("connection", (socket) => this.accept(socket))
  }

  /** Listens on `path` (owned by the sandbox's root, `hostUid`, so its supervisor may connect). */
  static async listen(path: string, hostUid: number): Promise<SupervisorLink> {
    const server = Net.createServer()
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject)
      server.listen(path, () => resolve())
    })
    await Fs.chown(path, hostUid, hostUid)
    await Fs.chmod(path, 0o600)
    return new SupervisorLink(server)
  }

  private accept(socket: Net.Socket) {
    if (this.closed) return socket.destroy()
    socket.setNoDelay(true)
    if (this.lifeline === undefined) {
      this.lifeline = socket
      socket.write(encode("L"))
      socket.on("error", () => undefined)
      socket.on("close", () => this.markDead())
      this.markReady()
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
      return waiter(socket)
    }
    this.idle.push(socket)
  }

  /** An idle connection for one operation; fails once the sandbox is gone. */
  take(): Promise<Net.Socket> {
    if (this.closed) return Promise.reject(new SupervisorError("the sandbox has ended"))
    for (let socket = this.idle.shift(); socket !== undefined; socket = this.idle.shift()) {
      if (!socket.destroyed) {
        socket.removeAllListeners("close")
        return Promise.resolve(socket)
      }
    }
    return new Promise((resolve, reject) => {
      const give = (socket: Net.Socket) => resolve(socket)
      this.waiting.push(give)
      void this.dead.then(() => {
        const at = this.waiting.indexOf(give)
        if (at >= 0) {
          this.waiting.splice(at, 1)
          reject(new SupervisorError("the sandbox has ended"))
        }
      })
    })
  }

  close() {
    this.closed = true
    for (const socket of this.idle.splice(0)) socket.destroy()
    this.lifeline?.destroy()
    this.server.close()
    this.markDead()
  }

  /** One request, then frames until `done` says the answer is whole. */
  private async exchange(request: Buffer, done: (frame: Frame) => boolean): Promise<Array<Frame>> {
    const socket = await this.take()
    return new Promise((resolve, reject) => {
      const reader = new FrameReader()
      const frames: Array<Frame> = []
      socket.on("data", (chunk: Buffer) => {
        for (const frame of reader.push(chunk)) {
          frames.push(frame)
          if (frame.type === "E") {
            socket.destroy()
            return reject(new SupervisorError(frame.payload.toString()))
          }
          if (done(frame)) {
            socket.destroy()
            return resolve(frames)
          }
        }
      })
      socket.once("close", () => reject(new SupervisorError("the sandbox has ended")))
      socket.write(request)
    })
  }

  async version(): Promise<string> {
    const [answer] = await this.exchange(encode("V"), (frame) => frame.type === "V")
    return answer!.payload.toString()
  }

  /** Starts a process; `listener` gets its output from the first byte. */
  async spawn(request: SpawnRequest, listener: OutputListener): Promise<Process> {
    // Checked before a connection is taken: a request that cannot be sent must not hold one.
    const fields = spawnFields(request)
    if (fields.length > MAX_FRAME) throw new RangeError(`a spawn request of ${fields.length} bytes`)
    const socket = await this.take()
    return new Promise((resolve, reject) => {
      const reader = new FrameReader()
      let started = false
      let finish!: (status: ExitStatus) => void
      const exited = new Promise<ExitStatus>((done) => (finish = done))
      const send = (frame: Buffer) => {
        if (!socket.destroyed) socket.write(frame)
      }
      socket.on("data", (chunk: Buffer) => {
        for (const frame of reader.push(chunk)) {
          switch (frame.type) {
            case "P": {
              started = true
              resolve({
                pid: Number(frame.payload.toString()),
                exited,
                write: (data) => encodeChunked("I", data).forEach(send),
                closeStdin: () => send(encode("C")),
                signal: (signal) => send(encode("K", String(signal))),
                resize: (cols, rows) => send(encode("Z", `${cols} ${rows}`)),
                pause: () => socket.pause(),
                resume: () => socket.resume(),
                hangUp: () => socket.destroy()
              })
              break
            }
            case "O":
              listener("stdout", frame.payload)
              break
            case "R":
              listener("stderr", frame.payload)
              break
            case "X": {
              const [code, signal] = frame.payload.toString().split(" ").map(Number)
              finish({
                code: signal !== 0 || code === undefined || code < 0 ? null : code,
                signal: signal === 0 || signal === undefined ? null : signal
              })
              socket.destroy()
              break
            }
            case "E":
              socket.destroy()
              reject(new SupervisorError(frame.payload.toString()))
              break
          }
        }
      })
      socket.once("close", () => {
        if (!started) reject(new SupervisorError("the sandbox has ended"))
        finish({ code: null, signal: null })
      })
      socket.write(encode("S", fields))
    })
  }

  /** A regular file's size and mode, then its bytes. */
  async readFile(
    path: string
  ): Promise<{ readonly size: number; readonly mode: number; readonly body: ReadableStream<Uint8Array> }> {
    const socket = await this.take()
    return new Promise((resolve, reject) => {
      const reader = new FrameReader()
      let controller!: ReadableStreamDefaultController<Uint8Array>
      let answered = false
      const body = new ReadableStream<Uint8Array>({
        start: (c) => {
          controller = c
        },
        pull: () => {
          socket.resume()
        },
        cancel: () => {
          socket.destroy()
        }
      })
      socket.on("data", (chunk: Buffer) => {
        for (const frame of reader.push(chunk)) {
          switch (frame.type) {
            case "H": {
              const [size, mode] = frame.payload.toString().split(" ")
              answered = true
              resolve({ size: Number(size), mode: Number.parseInt(mode ?? "644", 8), body })
              break
            }
            case "D":
              controller.enqueue(new Uint8Array(frame.payload))
              if ((controller.desiredSize ?? 1) <= 0) socket.pause()
              break
            case "X":
              controller.close()
              socket.destroy()
              break
            case "E":
              socket.destroy()
              if (!answered) reject(new SupervisorError(frame.payload.toString()))
              else controller.error(new SupervisorError(frame.payload.toString()))
              break
          }
        }
      })
      socket.once("close", () => {
        if (!answered) reject(new SupervisorError("the sandbox has ended"))
        else {
          try {
            controller.error(new SupervisorError("the sandbox has ended"))
          } catch {
            // closed already
          }
        }
      })
      socket.write(encode("F", path))
    })
  }

  /**
   * Writes `chunks` to `path` (parents made as needed) through a temporary
   * file renamed into place: a transfer cut short leaves nothing. Resolves
   * with the bytes written.
   */
  async writeFile(path: string, mode: number, chunks: AsyncIterable<Uint8Array>): Promise<number> {
    const socket = await this.take()
    const answer = new Promise<number>((resolve, reject) => {
      const reader = new FrameReader()
      socket.on("data", (chunk: Buffer) => {
        for (const frame of reader.push(chunk)) {
          socket.destroy()
          if (frame.type === "X") resolve(Number(frame.payload.toString()))
          else reject(new SupervisorError(frame.payload.toString()))
        }
      })
      socket.once("close", () => reject(new SupervisorError("the sandbox has ended")))
    })
    answer.catch(() => undefined)
    // Waits for the socket to drain, or to close: a refusal (answered, then closed) ends the transfer.
    const write = (frame: Buffer) =>
      new Promise<void>((resolve, reject) => {
        if (socket.destroyed) return reject(new SupervisorError("the sandbox has ended"))
        if (socket.write(frame)) return resolve()
        const drained = () => {
          socket.off("close", closed)
          resolve()
        }
        const closed = () => {
          socket.off("drain", drained)
          reject(new SupervisorError("the sandbox has ended"))
        }
        socket.once("drain", drained)
        socket.once("close", closed)
      })
    try {
      await write(encode("W", `${mode.toString(8)}\0${path}\0`))
      for await (const chunk of chunks) {
        for (const frame of encodeChunked(
          "D",
          Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
        )) {
          await write(frame)
        }
      }
      await write(encode("C"))
    } catch (error) {
      // Cut short: the supervisor drops the temporary file when the connection goes. Its refusal,
      // if it gave one, says more than the closed connection.
      socket.destroy()
      const refused = await answer.then(
        () => undefined,
        (reason: unknown) => reason
      )
      throw refused instanceof SupervisorError && refused.message !== "the sandbox has ended"
        ? refused
        : error
    }
    return answer
  }

  /** A connection to 127.0.0.1:`port` inside the sandbox: raw bytes both ways. */
  async dial(port: number): Promise<Net.Socket> {
    const socket = await this.take()
    return new Promise((resolve, reject) => {
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
          return reject(new SupervisorError(frame.payload.toString()))
        }
        const rest = reader.rest()
        if (rest.length > 0) socket.unshift(rest)
        resolve(socket)
      }
      const onClose = () => reject(new SupervisorError("the sandbox has ended"))
      socket.on("data", onData)
      socket.once("close", onClose)
      socket.write(encode("T", String(port)))
    })
  }
}
