import { Effect, Stream } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Path from "node:path"
import { InvalidField, type InvalidRequest, SessionNotOpen } from "../../kernel/Errors.ts"
import { FILE_TRANSFER_MAX_BYTES } from "../../kernel/Sandbox.ts"
import * as Uploads from "../../platform/files/Uploads.ts"
import { FileNotFound, FileTooLarge, type TooManyUploads } from "../../kernel/SandboxErrors.ts"
import type { SandboxRuntime } from "../../runtime/SessionRuntime.ts"
import { resolveInSandbox } from "../../runtime/SandboxPath.ts"
import type { SupervisorError } from "../../runtime/SupervisorError.ts"

export type UploadError = InvalidField | InvalidRequest | FileTooLarge | SessionNotOpen | TooManyUploads
export type DownloadError = InvalidField | FileNotFound | FileTooLarge | SessionNotOpen
export type WriteError = InvalidField | FileTooLarge | SessionNotOpen | TooManyUploads

const fileError =
  (field: string) =>
  (error: SupervisorError): Effect.Effect<never, SessionNotOpen | FileNotFound | InvalidField> => {
    if (error.sandboxEnded) return Effect.fail(new SessionNotOpen())
    if (error.message.endsWith("No such file or directory")) return Effect.fail(new FileNotFound())
    return Effect.fail(new InvalidField({ field }))
  }

/** A `Content-Disposition` naming the file, safe for any name. */
export const attachment = (name: string) =>
  `attachment; filename="${name.replace(/[^\x20-\x7e]|["\\]/g, "_")}"; filename*=UTF-8''${encodeURIComponent(name)}`

/**
 * `POST /v1/sessions/{id}/upload` on the sandbox's node: the multipart
 * fields `path` and `file` (in either order), the file held until it is
 * whole (16 MiB at most: one byte more is 413 before anything reaches the
 * sandbox), then written through the supervisor to a temporary name renamed
 * into place. A session takes `UPLOADS_IN_FLIGHT` at once (429 beyond), so
 * what the service holds for its uploads is bounded.
 */
export const upload = (runtime: SandboxRuntime, request: HttpServerRequest.HttpServerRequest) =>
  Uploads.oneAtATime(runtime, receive(runtime, request))

const receive = (runtime: SandboxRuntime, request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const { fields, file } = yield* Uploads.receive(request)
    const path = fields.get("path")
    if (path === undefined) return yield* new InvalidField({ field: "path" })
    if (file === undefined) return yield* new InvalidField({ field: "file" })
    const target = yield* writable(path)
    const chunks = file.chunks
    const written = yield* runtime.exec.files
      .writeFile(
        target,
        0o644,
        (async function* () {
          yield* chunks
        })()
      )
      .pipe(Effect.catchTag("SupervisorError", writeRefused))
    return { path: target, size: written }
  })

/** Where a file is written: inside the sandbox, and not its root. */
const writable = (path: string) => {
  const target = resolveInSandbox(path)
  return target === undefined || target === "/"
    ? Effect.fail(new InvalidField({ field: "path" }))
    : Effect.succeed(target)
}

/** The sandbox's refusal of a write (a directory there, a file where a parent should be), or its end. */
const writeRefused = (error: SupervisorError) =>
  Effect.fail(error.sandboxEnded ? new SessionNotOpen() : new InvalidField({ field: "path" }))

/**
 * A file written whole (at most 16 MiB), as an upload writes it: through
 * the supervisor to a temporary name renamed into place, one of the
 * session's `UPLOADS_IN_FLIGHT`.
 */
export const writeWhole = (runtime: SandboxRuntime, path: string, content: Uint8Array) =>
  Effect.gen(function* () {
    if (content.byteLength > FILE_TRANSFER_MAX_BYTES) return yield* new FileTooLarge()
    const target = yield* writable(path)
    const written = yield* Uploads.oneAtATime(
      runtime,
      runtime.exec.files
        .writeFile(
          target,
          0o644,
          (async function* () {
            yield content
          })()
        )
        .pipe(Effect.catchTag("SupervisorError", writeRefused))
    )
    return { path: target, size: written }
  })

/** A sandbox's file opened for reading (16 MiB at most), with its path in the sandbox. */
const openFile = (runtime: SandboxRuntime, rawPath: string) =>
  Effect.gen(function* () {
    const path = resolveInSandbox(rawPath)
    if (path === undefined) return yield* new InvalidField({ field: "path" })
    const file = yield* runtime.exec.files
      .readFile(path)
      .pipe(Effect.catchTag("SupervisorError", fileError("path")))
    if (file.size > FILE_TRANSFER_MAX_BYTES) {
      yield* Effect.promise(() => file.body.cancel())
      return yield* new FileTooLarge()
    }
    return { path, file }
  })

/** A file read whole (at most 16 MiB), with its path in the sandbox. */
export const readWhole = (runtime: SandboxRuntime, rawPath: string) =>
  Effect.gen(function* () {
    const { path, file } = yield* openFile(runtime, rawPath)
    // A read cut off midway is the sandbox going away under it.
    const content = yield* Effect.tryPromise({
      try: () => new Response(file.body).arrayBuffer(),
      catch: () => new SessionNotOpen()
    })
    return { path, content: new Uint8Array(content) }
  })

/** `GET /v1/sessions/{id}/download?path=` of a sandbox: the file streamed, with its length. */
export const download = (runtime: SandboxRuntime, rawPath: string) =>
  Effect.gen(function* () {
    const { path, file } = yield* openFile(runtime, rawPath)
    return HttpServerResponse.stream(
      Stream.fromReadableStream({ evaluate: () => file.body, onError: (error) => error }).pipe(Stream.orDie),
      {
        contentType: "application/octet-stream",
        contentLength: file.size,
        headers: { "content-disposition": attachment(Path.posix.basename(path)) }
      }
    )
  })
