/**
 * A sandbox's directory watches as the API shows them, and a watch's changes
 * as server-sent events that resume after a reconnect from the last one a
 * client saw (`Last-Event-ID`).
 */
import { Effect, Option, Stream } from "effect"
import { InvalidField } from "../../kernel/Errors.ts"
import type { FileWatchInfo } from "../../kernel/Sandbox.ts"
import { TooManyWatches, WatchNotFound } from "../../kernel/SandboxErrors.ts"
import type { FileWatch, WatchRegistry } from "../../runtime/Exec.ts"
import type { SandboxRuntime } from "../../runtime/SessionRuntime.ts"
import { pathIn, refusal } from "./FileSystem.ts"

/** How often an idle stream says it is alive (through proxies that drop quiet connections). */
const KEEPALIVE = "15 seconds"

export const infoOf = (sessionId: string, watch: FileWatch): FileWatchInfo => ({
  object: "file_watch",
  id: watch.id,
  session_id: sessionId,
  path: watch.path,
  recursive: watch.recursive,
  status: watch.endedAt === null ? "watching" : "ended",
  changes: watch.changes,
  created_at: watch.createdAt,
  ended_at: watch.endedAt
})

export const find = (watches: WatchRegistry, id: string) => {
  const watch = watches.get(id)
  return watch === undefined ? Effect.fail(new WatchNotFound()) : Effect.succeed(watch)
}

/** Starts watching `rawPath`, a directory of the sandbox. */
export const start = (runtime: SandboxRuntime, rawPath: string, recursive: boolean) =>
  Effect.gen(function* () {
    const path = yield* pathIn(rawPath, "path")
    return yield* runtime.exec.watches.start(path, recursive).pipe(
      Effect.catchTags({
        SupervisorError: refusal("path"),
        WatchesFull: () => Effect.fail(new TooManyWatches())
      })
    )
  })

/** `Last-Event-ID` (or `?last_event_id=`): where a stream resumes. */
export const resumePoint = (raw: string | undefined) =>
  raw === undefined || /^\d{1,15}$/.test(raw)
    ? Effect.succeed(Number(raw ?? "0"))
    : Effect.fail(new InvalidField({ field: "last_event_id" }))

const event = (id: number, name: string, data: unknown) =>
  Buffer.from(`id: ${id}\nevent: ${name}\ndata: ${JSON.stringify(data)}\n\n`)

/**
 * The watch's changes after `after` as server-sent events, one per change
 * (`create`, `modify`, `delete`, `move`, `overflow`; `data`: `{ path, to,
 * directory }`), each with its id. A reader further behind than the changes
 * kept first gets one `overflow` (without an id) and the kept ones. Once the
 * watch has ended and its changes are sent, an `end` event, and the stream
 * ends.
 */
export const events = (watch: FileWatch, after: number): Stream.Stream<Uint8Array> => {
  const step = (seen: number): Effect.Effect<readonly [ReadonlyArray<Uint8Array>, Option.Option<number>]> => {
    const { lost, changes } = watch.read(seen)
    if (changes.length > 0 || lost) {
      const out: Array<Uint8Array> = []
      if (lost)
        out.push(
          Buffer.from(
            `event: overflow\ndata: ${JSON.stringify({ path: watch.path, to: null, directory: true })}\n\n`
          )
        )
      for (const change of changes)
        out.push(
          event(change.id, change.type, { path: change.path, to: change.to, directory: change.directory })
        )
      return Effect.succeed([out, Option.some(changes[changes.length - 1]?.id ?? watch.changes)])
    }
    if (watch.endedAt !== null)
      return Effect.succeed([[Buffer.from(`event: end\ndata: {}\n\n`)], Option.none()])
    return Effect.map(
      Effect.timeoutOption(watch.waitBeyond(seen), KEEPALIVE),
      (woke) => [Option.isNone(woke) ? [Buffer.from(": keep-alive\n\n")] : [], Option.some(seen)] as const
    )
  }
  return Stream.concat(
    Stream.succeed<Uint8Array>(Buffer.from(": stream\n\n")),
    Stream.paginate(after, (seen: number) => Effect.suspend(() => step(seen)))
  )
}
