import { Effect, Stream } from "effect"
import { type HttpServerRequest, Multipart } from "effect/http"
import { InvalidRequest } from "../../kernel/Errors.ts"
import { FILE_TRANSFER_MAX_BYTES, UPLOADS_IN_FLIGHT } from "../../kernel/Sandbox.ts"
import { FileTooLarge, TooManyUploads } from "../../kernel/SandboxErrors.ts"

// An upload's body as the file routes read it (a sandbox's and a browser session's alike): the
// multipart fields, and the one file part named `file` held whole, 16 MiB at most.

/** What a multipart upload held: its text fields, and its `file` part if it had one. */
export interface ReceivedUpload {
  readonly fields: ReadonlyMap<string, string>
  readonly file:
    | { readonly name: string | undefined; readonly chunks: ReadonlyArray<Uint8Array>; readonly size: number }
    | undefined
}

/**
 * The request's multipart body: its fields, and the first file part named `file` held until it is
 * whole (one byte over `FILE_TRANSFER_MAX_BYTES` is `FileTooLarge`, before any more is read); other
 * file parts are read past. A body that is not multipart is `InvalidRequest`.
 */
export const receive = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const fields = new Map<string, string>()
    let file: { name: string | undefined; chunks: Array<Uint8Array>; size: number } | undefined
    yield* request.multipartStream.pipe(
      Stream.mapError(() => new InvalidRequest()),
      Stream.runForEach((part) => {
        if (Multipart.isField(part)) {
          fields.set(part.key, part.value)
          return Effect.void
        }
        if (!Multipart.isFile(part) || part.key !== "file" || file !== undefined)
          return Multipart.isFile(part)
            ? Stream.runDrain(part.content).pipe(Effect.mapError(() => new InvalidRequest()))
            : Effect.void
        const held = { name: part.name as string | undefined, chunks: [] as Array<Uint8Array>, size: 0 }
        file = held
        return part.content.pipe(
          Stream.mapError(() => new InvalidRequest()),
          Stream.runForEach((chunk) => {
            held.size += chunk.length
            if (held.size > FILE_TRANSFER_MAX_BYTES) return Effect.fail(new FileTooLarge())
            held.chunks.push(chunk)
            return Effect.void
          })
        )
      })
    )
    return { fields, file } satisfies ReceivedUpload
  })

/** Uploads under way, by the session's runtime they go to. */
const inFlight = new WeakMap<object, number>()

/**
 * Counts an upload to `runtime` while `work` runs: past `UPLOADS_IN_FLIGHT` at once it is
 * `TooManyUploads` before any of its body is read, so what the service holds for a session's
 * uploads is bounded.
 */
export const oneAtATime = <A, E, R>(runtime: object, work: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.suspend(() => {
      const now = inFlight.get(runtime) ?? 0
      if (now >= UPLOADS_IN_FLIGHT) return Effect.fail(new TooManyUploads())
      inFlight.set(runtime, now + 1)
      return Effect.void
    }),
    () => work,
    () => Effect.sync(() => inFlight.set(runtime, (inFlight.get(runtime) ?? 1) - 1))
  )
