import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import { encode, type Frame, FrameReader, MAX_FRAME, spawnFields } from "./Frames.ts"
import { SupervisorError } from "../../runtime/SupervisorError.ts"
import * as SupervisorFiles from "./SupervisorFiles.ts"
import * as SupervisorProcess from "./SupervisorProcess.ts"
import type { OutputListener, Process, SpawnRequest } from "./SupervisorProcess.ts"

export { SupervisorError } from "../../runtime/SupervisorError.ts"
export type { ExitStatus, OutputListener, Process, SpawnRequest } from "./SupervisorProcess.ts"

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
    if (this.closed) return Promise.reject(SupervisorError.ended())
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
          reject(SupervisorError.ended())
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
            return reject(new SupervisorError({ message: frame.payload.toString() }))
          }
          if (done(frame)) {
            socket.destroy()
            return resolve(frames)
          }
        }
      })
      socket.once("close", () => reject(SupervisorError.ended()))
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
    return SupervisorProcess.spawn(socket, fields, listener)
  }

  /** A regular file's size and mode, then its bytes. */
  async readFile(
    path: string
  ): Promise<{ readonly size: number; readonly mode: number; readonly body: ReadableStream<Uint8Array> }> {
    const socket = await this.take()
    return SupervisorFiles.readFile(socket, path)
  }

  /**
   * Writes `chunks` to `path` (parents made as needed) through a temporary
   * file renamed into place: a transfer cut short leaves nothing. Resolves
   * with the bytes written.
   */
  async writeFile(path: string, mode: number, chunks: AsyncIterable<Uint8Array>): Promise<number> {
    const socket = await this.take()
    return SupervisorFiles.writeFile(socket, path, mode, chunks)
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
          return reject(new SupervisorError({ message: frame.payload.toString() }))
        }
        const rest = reader.rest()
        if (rest.length > 0) socket.unshift(rest)
        resolve(socket)
      }
      const onClose = () => reject(SupervisorError.ended())
      socket.on("data", onData)
      socket.once("close", onClose)
      socket.write(encode("T", String(port)))
    })
  }
}
