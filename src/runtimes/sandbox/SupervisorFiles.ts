/**
 * File transfer through the supervisor, each on a connection of its own:
 * a read streams the file's bytes as the consumer pulls them (the socket
 * paused between), a write streams them as the socket drains.
 */
import type * as Net from "node:net"
import { encode, encodeChunked, FrameReader } from "./Frames.ts"
import { SupervisorError } from "../../runtime/SupervisorError.ts"

/** A regular file's size and mode, then its bytes. */
export const readFile = (
  socket: Net.Socket,
  path: string
): Promise<{ readonly size: number; readonly mode: number; readonly body: ReadableStream<Uint8Array> }> =>
  new Promise((resolve, reject) => {
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
            if (!answered) reject(new SupervisorError({ message: frame.payload.toString() }))
            else controller.error(new SupervisorError({ message: frame.payload.toString() }))
            break
        }
      }
    })
    socket.once("close", () => {
      if (!answered) reject(SupervisorError.ended())
      else {
        try {
          controller.error(SupervisorError.ended())
        } catch {
          // closed already
        }
      }
    })
    socket.write(encode("F", path))
  })

/**
 * Writes `chunks` to `path` (parents made as needed) through a temporary
 * file renamed into place: a transfer cut short leaves nothing. Resolves
 * with the bytes written.
 */
export const writeFile = async (
  socket: Net.Socket,
  path: string,
  mode: number,
  chunks: AsyncIterable<Uint8Array>
): Promise<number> => {
  const answer = new Promise<number>((resolve, reject) => {
    const reader = new FrameReader()
    socket.on("data", (chunk: Buffer) => {
      for (const frame of reader.push(chunk)) {
        socket.destroy()
        if (frame.type === "X") resolve(Number(frame.payload.toString()))
        else reject(new SupervisorError({ message: frame.payload.toString() }))
      }
    })
    socket.once("close", () => reject(SupervisorError.ended()))
  })
  answer.catch(() => undefined)
  // Waits for the socket to drain, or to close: a refusal (answered, then closed) ends the transfer.
  const write = (frame: Buffer) =>
    new Promise<void>((resolve, reject) => {
      if (socket.destroyed) return reject(SupervisorError.ended())
      if (socket.write(frame)) return resolve()
      const drained = () => {
        socket.off("close", closed)
        resolve()
      }
      const closed = () => {
        socket.off("drain", drained)
        reject(SupervisorError.ended())
      }
      socket.once("drain", drained)
      socket.once("close", closed)
    })
  try {
    await write(encode("W", `${mode.toString(8)}\0${path}\0`))
    for await (const chunk of chunks) {
      for (const frame of encodeChunked("D", Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))) {
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
    throw refused instanceof SupervisorError && refused.message !== "the sandbox has ended" ? refused : error
  }
  return answer
}
