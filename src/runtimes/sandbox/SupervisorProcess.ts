/**
 * A process in the sandbox, on the connection its spawn request took: the
 * supervisor sends its pid, its output and its exit as frames, and the same
 * connection carries its stdin, signals and resizes back. Closing the
 * connection hangs it up.
 */
import { Deferred, Effect } from "effect"
import type * as Net from "node:net"
import { encode, encodeChunked, FrameReader } from "./Frames.ts"
import { SupervisorError } from "../../runtime/SupervisorError.ts"
import type { ExitStatus, OutputListener, Process, SpawnRequest } from "../../runtime/Exec.ts"

export type { ExitStatus, OutputListener, Process, SpawnRequest }

/**
 * Sends the spawn request (`fields`, checked already) on `socket`; `listener`
 * gets the output from the first byte, and `onExit`, once it started, its end.
 */
export const spawn = (
  socket: Net.Socket,
  fields: Buffer,
  listener: OutputListener,
  onExit?: (status: ExitStatus) => void
): Effect.Effect<Process, SupervisorError> =>
  Effect.callback((resume) => {
    const reader = new FrameReader()
    let started = false
    const exited = Deferred.makeUnsafe<ExitStatus>()
    const finish = (status: ExitStatus) => {
      if (Deferred.doneUnsafe(exited, Effect.succeed(status)) && started) onExit?.(status)
    }
    const send = (frame: Buffer) => {
      if (!socket.destroyed) socket.write(frame)
    }
    // Stdin sent that the program has not taken yet (the supervisor answers 'A' as it leaves its queue).
    let unread = 0
    socket.on("data", (chunk: Buffer) => {
      for (const frame of reader.push(chunk)) {
        switch (frame.type) {
          case "P": {
            started = true
            resume(
              Effect.succeed({
                pid: Number(frame.payload.toString()),
                exited: Deferred.await(exited),
                write: (data) => {
                  unread += data.length
                  encodeChunked("I", data).forEach(send)
                },
                stdinUnread: () => unread,
                closeStdin: () => send(encode("C")),
                signal: (signal) => send(encode("K", String(signal))),
                resize: (cols, rows) => send(encode("Z", `${cols} ${rows}`)),
                pause: () => socket.pause(),
                resume: () => socket.resume(),
                hangUp: () => socket.destroy()
              })
            )
            break
          }
          case "A":
            unread = Math.max(0, unread - Number(frame.payload.toString()))
            break
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
            resume(Effect.fail(new SupervisorError({ message: frame.payload.toString() })))
            break
        }
      }
    })
    socket.once("close", () => {
      if (!started) resume(Effect.fail(SupervisorError.ended()))
      finish({ code: null, signal: null })
    })
    socket.write(encode("S", fields))
  })
