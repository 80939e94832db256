/**
 * A sandbox's files beyond whole reads and writes: a directory listed by
 * pages, a path's entry, a directory made, a path moved or removed. Paths
 * follow the transfers' rules (`resolveInSandbox`: absolute, or relative to
 * `/root`; climbing above `/` is refused, never clamped), and the
 * supervisor's refusal, named by its errno, becomes the API's error.
 */
import { Effect } from "effect"
import * as Path from "node:path"
import { InvalidField, SessionNotOpen } from "../../kernel/Errors.ts"
import { FILE_LIST_MAX, type FileInfo, type FileInfoList } from "../../kernel/Sandbox.ts"
import { DirectoryNotEmpty, FileExists, FileNotFound, WrongFileType } from "../../kernel/SandboxErrors.ts"
import type { FileEntry } from "../../runtime/Exec.ts"
import { resolveInSandbox } from "../../runtime/SandboxPath.ts"
import type { SandboxRuntime } from "../../runtime/SessionRuntime.ts"
import type { SupervisorError } from "../../runtime/SupervisorError.ts"

export type FileSystemError =
  InvalidField | SessionNotOpen | FileNotFound | FileExists | DirectoryNotEmpty | WrongFileType

/** The supervisor's refusal of a call on `field`'s path, as the API answers it. */
export const refusal =
  (field: string) =>
  (error: SupervisorError): Effect.Effect<never, FileSystemError> => {
    if (error.sandboxEnded) return Effect.fail(new SessionNotOpen())
    switch (error.errno) {
      case "ENOENT":
        return Effect.fail(new FileNotFound())
      case "EEXIST":
        return Effect.fail(new FileExists())
      case "ENOTEMPTY":
        return Effect.fail(new DirectoryNotEmpty())
      case "ENOTDIR":
        return Effect.fail(
          new WrongFileType({ detail: `Not a directory: ${field}, or a directory above it, is a file.` })
        )
      case "EISDIR":
        return Effect.fail(
          new WrongFileType({ detail: `A directory is at ${field}, where a file was expected.` })
        )
      default:
        return Effect.fail(new InvalidField({ field }))
    }
  }

/** `raw` as a path in the sandbox, else 400 for `field`; `notRoot`: `/` itself is refused too. */
export const pathIn = (raw: string, field: string, notRoot = false) => {
  const path = resolveInSandbox(raw)
  return path === undefined || (notRoot && path === "/")
    ? Effect.fail(new InvalidField({ field }))
    : Effect.succeed(path)
}

const infoOf = (path: string, entry: FileEntry): FileInfo => ({
  object: "file",
  name: path === "/" ? "/" : entry.name,
  path,
  type: entry.type,
  size: entry.size,
  mode: `0${entry.mode.toString(8).padStart(3, "0")}`,
  modified_at: entry.modifiedAt,
  symlink_target: entry.target
})

/** A page's cursor: the last name it showed (names may hold any byte but `/` and NUL). */
const cursorOf = (name: string) => Buffer.from(name).toString("base64url")
const nameOf = (cursor: string) => {
  const name = Buffer.from(cursor, "base64url").toString()
  return name === "" || name.includes("/") || name.includes("\0") || cursorOf(name) !== cursor
    ? Effect.fail(new InvalidField({ field: "cursor" }))
    : Effect.succeed(name)
}

export const DEFAULT_LIST_LIMIT = 200

/** Directory `rawPath`'s entries by name, `limit` (1 to 1000) a page, after `cursor`. */
export const list = (
  runtime: SandboxRuntime,
  rawPath: string,
  limit: number | undefined,
  cursor: string | undefined
): Effect.Effect<FileInfoList, FileSystemError> =>
  Effect.gen(function* () {
    const path = yield* pathIn(rawPath, "path")
    const size = limit ?? DEFAULT_LIST_LIMIT
    if (!Number.isInteger(size) || size < 1 || size > FILE_LIST_MAX)
      return yield* new InvalidField({ field: "limit" })
    const after = cursor === undefined ? "" : yield* nameOf(cursor)
    const page = yield* runtime.exec.files
      .list(path, after, size)
      .pipe(Effect.catchTag("SupervisorError", refusal("path")))
    const data = page.entries.map((entry) => infoOf(Path.posix.join(path, entry.name), entry))
    const last = data[data.length - 1]
    return {
      object: "list" as const,
      data,
      has_more: page.more,
      next_cursor: page.more && last !== undefined ? cursorOf(last.name) : null
    }
  })

export const stat = (runtime: SandboxRuntime, rawPath: string) =>
  Effect.gen(function* () {
    const path = yield* pathIn(rawPath, "path")
    const entry = yield* runtime.exec.files
      .stat(path)
      .pipe(Effect.catchTag("SupervisorError", refusal("path")))
    return infoOf(path, entry)
  })

export const mkdir = (runtime: SandboxRuntime, rawPath: string, parents: boolean) =>
  Effect.gen(function* () {
    const path = yield* pathIn(rawPath, "path", true)
    const entry = yield* runtime.exec.files
      .mkdir(path, parents)
      .pipe(Effect.catchTag("SupervisorError", refusal("path")))
    return infoOf(path, entry)
  })

export const move = (runtime: SandboxRuntime, rawFrom: string, rawTo: string, overwrite: boolean) =>
  Effect.gen(function* () {
    const from = yield* pathIn(rawFrom, "from", true)
    const to = yield* pathIn(rawTo, "to", true)
    // Into itself: the kernel's EINVAL, said by the field it is about.
    if (to === from || to.startsWith(`${from}/`)) return yield* new InvalidField({ field: "to" })
    const entry = yield* runtime.exec.files
      .move(from, to, overwrite)
      .pipe(
        Effect.catchTag("SupervisorError", (error) =>
          refusal(error.message.includes(` ${from}: `) ? "from" : "to")(error)
        )
      )
    return infoOf(to, entry)
  })

export const remove = (runtime: SandboxRuntime, rawPath: string, recursive: boolean) =>
  Effect.gen(function* () {
    const path = yield* pathIn(rawPath, "path", true)
    yield* runtime.exec.files
      .remove(path, recursive)
      .pipe(Effect.catchTag("SupervisorError", refusal("path")))
    return path
  })
