/**
 * A process in the sandbox, on the connection its spawn request took: the
 * supervisor sends its pid, its output and its exit as frames, and the same
 * connection carries its stdin, signals and resizes back. Closing the
 * connection hangs it up.
 */
import type * as Net from "node:net"
import { encode, encodeChunked, FrameReader } from "./Frames.ts"
import { SupervisorError } from "./SupervisorError.ts"

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

/** Sends the spawn request (`fields`, checked already) on `socket`; `listener` gets the output from the first byte. */
export const spawn = (socket: Net.Socket, fields: Buffer, listener: OutputListener): Promise<Process> =>
  new Promise((resolve, reject) => {
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
