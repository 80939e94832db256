/**
 * Files through the supervisor, each call on a connection of its own: a
 * read streams the file's bytes as the consumer pulls them (the socket
 * paused between), a write streams them as the socket drains; a list, stat,
 * mkdir, move or remove is one request and its answer; a watch holds its
 * connection for as long as it follows its directory.
 */
import { Deferred, Effect, Result, Stream } from "effect"
import type * as Net from "node:net"
import { decodeChange, decodeEntry, encode, encodeChunked, type Frame, FrameReader } from "./Frames.ts"
import type { DirectoryWatch, FileChange, FileEntry } from "../../runtime/Exec.ts"
import { SupervisorError } from "../../runtime/SupervisorError.ts"

/** A regular file's size and mode, then its bytes. */
export const readFile = (
  socket: Net.Socket,
  path: string
): Effect.Effect<
  { readonly size: number; readonly mode: number; readonly body: ReadableStream<Uint8Array> },
  SupervisorError
> =>
  Effect.callback((resume) => {
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
            resume(Effect.succeed({ size: Number(size), mode: Number.parseInt(mode ?? "644", 8), body }))
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
            if (!answered) resume(Effect.fail(new SupervisorError({ message: frame.payload.toString() })))
            else controller.error(new SupervisorError({ message: frame.payload.toString() }))
            break
        }
      }
    })
    socket.once("close", () => {
      if (!answered) resume(Effect.fail(SupervisorError.ended()))
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

/** Writes `frame`, then waits for the socket to drain, or to close: a refusal (answered, then closed) ends the transfer. */
const send = (socket: Net.Socket, frame: Buffer): Effect.Effect<void, SupervisorError> =>
  Effect.callback((resume) => {
    if (socket.destroyed) return resume(Effect.fail(SupervisorError.ended()))
    if (socket.write(frame)) return resume(Effect.void)
    const drained = () => {
      socket.off("close", closed)
      resume(Effect.void)
    }
    const closed = () => {
      socket.off("drain", drained)
      resume(Effect.fail(SupervisorError.ended()))
    }
    socket.once("drain", drained)
    socket.once("close", closed)
    return Effect.sync(() => {
      socket.off("drain", drained)
      socket.off("close", closed)
    })
  })

/**
 * Writes `chunks` to `path` (parents made as needed) through a temporary
 * file renamed into place: a transfer cut short leaves nothing. Succeeds
 * with the bytes written.
 */
export const writeFile = (
  socket: Net.Socket,
  path: string,
  mode: number,
  chunks: AsyncIterable<Uint8Array>
): Effect.Effect<number, SupervisorError> =>
  Effect.suspend(() => {
    const answer = Deferred.makeUnsafe<number, SupervisorError>()
    const reader = new FrameReader()
    socket.on("data", (chunk: Buffer) => {
      for (const frame of reader.push(chunk)) {
        socket.destroy()
        Deferred.doneUnsafe(
          answer,
          frame.type === "X"
            ? Effect.succeed(Number(frame.payload.toString()))
            : Effect.fail(new SupervisorError({ message: frame.payload.toString() }))
        )
      }
    })
    socket.once("close", () => Deferred.doneUnsafe(answer, Effect.fail(SupervisorError.ended())))
    const transfer = Effect.gen(function* () {
      yield* send(socket, encode("W", `${mode.toString(8)}\0${path}\0`))
      yield* Stream.fromAsyncIterable(chunks, (error) => error).pipe(
        Stream.orDie,
        Stream.runForEach((chunk) =>
          Effect.forEach(
            encodeChunked("D", Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)),
            (frame) => send(socket, frame),
            { discard: true }
          )
        )
      )
      yield* send(socket, encode("C"))
    })
    return transfer.pipe(
      // Cut short: the supervisor drops the temporary file when the connection goes. Its refusal,
      // if it gave one, says more than the closed connection.
      Effect.catch((error) => {
        socket.destroy()
        return Effect.flatMap(Effect.result(Deferred.await(answer)), (refused) =>
          Effect.fail(Result.isFailure(refused) && !refused.failure.sandboxEnded ? refused.failure : error)
        )
      }),
      Effect.andThen(Deferred.await(answer))
    )
  })

/**
 * One request, answered with `N` entries and an `X` (`single`: with one
 * entry): the answer once it is whole, or the supervisor's refusal.
 */
const entries = (
  socket: Net.Socket,
  request: Buffer,
  single = false
): Effect.Effect<{ readonly entries: Array<FileEntry>; readonly end: Frame | undefined }, SupervisorError> =>
  Effect.callback((resume) => {
    const reader = new FrameReader()
    const found: Array<FileEntry> = []
    socket.on("data", (chunk: Buffer) => {
      for (const frame of reader.push(chunk)) {
        if (frame.type === "N") found.push(decodeEntry(frame.payload))
        if (frame.type === "E") {
          socket.destroy()
          return resume(Effect.fail(new SupervisorError({ message: frame.payload.toString() })))
        }
        if (frame.type === "X" || (single && found.length > 0)) {
          socket.destroy()
          return resume(Effect.succeed({ entries: found, end: frame.type === "X" ? frame : undefined }))
        }
      }
    })
    socket.once("close", () => resume(Effect.fail(SupervisorError.ended())))
    socket.write(request)
  })

const one = (socket: Net.Socket, request: Buffer) =>
  Effect.flatMap(entries(socket, request, true), ({ entries }) =>
    entries[0] === undefined ? Effect.fail(SupervisorError.ended()) : Effect.succeed(entries[0])
  )

const flag = (on: boolean) => (on ? "1" : "0")

export const list = (socket: Net.Socket, path: string, after: string, limit: number) =>
  Effect.map(entries(socket, encode("G", `${limit}\0${after}\0${path}\0`)), ({ entries, end }) => ({
    entries,
    more: end?.payload.toString() === "1"
  }))

export const stat = (socket: Net.Socket, path: string) => one(socket, encode("Q", path))

export const mkdir = (socket: Net.Socket, path: string, parents: boolean) =>
  one(socket, encode("M", `${flag(parents)}\0${path}\0`))

export const move = (socket: Net.Socket, from: string, to: string, overwrite: boolean) =>
  one(socket, encode("B", `${flag(overwrite)}\0${from}\0${to}\0`))

export const remove = (socket: Net.Socket, path: string, recursive: boolean) =>
  Effect.asVoid(entries(socket, encode("U", `${flag(recursive)}\0${path}\0`)))

/**
 * Follows directory `path` on `socket`: succeeds once the supervisor has its
 * watches in place (every change after that is seen), then `onChange` gets
 * each change as it comes, and `onEnd` the end: the directory removed or
 * moved away, the sandbox gone, or `stop` closing the connection.
 */
export const watch = (
  socket: Net.Socket,
  path: string,
  recursive: boolean,
  onChange: (change: FileChange) => void,
  onEnd: () => void
): Effect.Effect<DirectoryWatch, SupervisorError> =>
  Effect.callback((resume) => {
    const reader = new FrameReader()
    let watching = false
    socket.on("data", (chunk: Buffer) => {
      for (const frame of reader.push(chunk)) {
        switch (frame.type) {
          case "Y":
            watching = true
            resume(Effect.succeed({ stop: () => socket.destroy() }))
            break
          case "N": {
            const change = decodeChange(frame.payload)
            if (change !== undefined) onChange(change)
            break
          }
          case "X":
            socket.destroy()
            break
          case "E":
            socket.destroy()
            if (!watching) resume(Effect.fail(new SupervisorError({ message: frame.payload.toString() })))
            break
        }
      }
    })
    socket.once("close", () => {
      if (watching) onEnd()
      else resume(Effect.fail(SupervisorError.ended()))
    })
    socket.write(encode("J", `${flag(recursive)}\0${path}\0`))
  })
