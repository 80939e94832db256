import { Effect, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { InvalidField } from "../domain/Errors.ts"
import { FileNotFound } from "../domain/SandboxErrors.ts"

/** Chromium's name for a download still under way. */
const IN_PROGRESS = ".crdownload"

/** A download's file name: a plain name in the dir, no path (`..`, `/`, absolute) and no link. */
const nameOk = (name: string) =>
  name !== "" &&
  name !== "." &&
  name !== ".." &&
  !name.includes("/") &&
  !name.includes("\0") &&
  name.length <= 255

/** The files a browser session downloaded so far (finished ones), newest first. */
export const list = (dir: string) =>
  Effect.promise(async () => {
    const entries = await Fs.readdir(dir, { withFileTypes: true }).catch(() => [])
    const files = []
    for (const entry of entries) {
      if (!entry.isFile() || entry.name.endsWith(IN_PROGRESS)) continue
      const stat = await Fs.lstat(Path.join(dir, entry.name)).catch(() => undefined)
      if (stat === undefined || !stat.isFile()) continue
      files.push({ name: entry.name, size: stat.size, modified_at: stat.mtime })
    }
    return files.sort((a, b) => b.modified_at.getTime() - a.modified_at.getTime())
  })

/**
 * One downloaded file, streamed with its length. The name must be a plain
 * file name of the dir: `..`, `/`, absolute paths and symlinks (a page may
 * name its download anything) are refused, and the file is opened without
 * following a link (`O_NOFOLLOW`), so nothing outside the session's downloads
 * can be read through it.
 */
export const serve = (dir: string, name: string) =>
  Effect.gen(function* () {
    if (!nameOk(name)) return yield* new InvalidField({ field: "path" })
    const opened = yield* Effect.promise(() =>
      Fs.open(Path.join(dir, name), FsSync.constants.O_RDONLY | FsSync.constants.O_NOFOLLOW).catch(
        (error: NodeJS.ErrnoException) => error
      )
    )
    if (opened instanceof Error) {
      return yield* opened.code === "ELOOP" ? new InvalidField({ field: "path" }) : new FileNotFound()
    }
    const stat = yield* Effect.promise(() => opened.stat())
    if (!stat.isFile() || name.endsWith(IN_PROGRESS)) {
      yield* Effect.promise(() => opened.close())
      return yield* new FileNotFound()
    }
    const body = opened.readableWebStream() as ReadableStream<Uint8Array>
    return HttpServerResponse.stream(
      Stream.fromReadableStream({ evaluate: () => body, onError: (error) => error }).pipe(
        Stream.ensuring(Effect.promise(() => opened.close().catch(() => undefined))),
        Stream.orDie
      ),
      {
        contentType: "application/octet-stream",
        contentLength: stat.size,
        headers: { "content-disposition": `attachment; filename*=UTF-8''${encodeURIComponent(name)}` }
      }
    )
  })
