import { Data, Deferred, Effect, Exit, Layer, type Scope, Stream } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Crypto from "node:crypto"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as Housekeeping from "../../platform/work/Housekeeping.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import { BrowserConfig } from "./BrowserConfig.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import * as Uploads from "../../platform/files/Uploads.ts"
import { LiveSessions } from "../../runtime/LiveSessions.ts"
import { FileNotFound } from "../../kernel/SandboxErrors.ts"
import type { CellControl } from "./Cell.ts"

/** Chromium's name for a download still under way. */
const IN_PROGRESS = ".crdownload"

/** A file system call failed; `code` is Node's (`ENOENT`: the file or dir is not there). */
class FsFailed extends Data.TaggedError("FsFailed")<{
  readonly code: string | undefined
  readonly cause: unknown
}> {}

const fsCall = <A>(call: () => Promise<A>) =>
  Effect.tryPromise({
    try: call,
    catch: (cause) =>
      new FsFailed({
        code: typeof cause === "object" && cause !== null && "code" in cause ? String(cause.code) : undefined,
        cause
      })
  })

/**
 * A file or dir passed over (gone meanwhile, or never made): `fallback`, and
 * the reason at debug level.
 */
const passOver =
  <A>(event: string, path: string, fallback: A) =>
  (error: FsFailed) =>
    Effect.as(Effect.logDebug(event, { path, reason: error.code ?? String(error.cause) }), fallback)

/**
 * Where a browser session's downloads go, on the node that runs it: outside
 * the browser's profile, so they outlive it by `DOWNLOAD_RETENTION_HOURS`.
 */
export const dirOf = (dataDir: string, sessionId: string) => Path.join(dataDir, "downloads", sessionId)

/**
 * The session's downloads dir, handed to its browser's user (the uid of its
 * profile dir) and no other; its parent is the service's alone (the browser
 * reaches its own dir through its cell, which binds it). Done in place (a
 * few metadata calls, microseconds each): it is on the way to ready, where a
 * trip through the thread pool waited up to 36 ms behind other work.
 */
export const prepare = (dir: string, profileDir: string) =>
  // Off the event loop: it runs beside the session's first requests.
  Effect.promise(async () => {
    await Fs.mkdir(Path.dirname(dir), { recursive: true, mode: 0o700 })
    await Fs.mkdir(dir, { recursive: true, mode: 0o700 })
    const { uid, gid } = await Fs.stat(profileDir)
    if (uid !== process.getuid?.()) await Fs.chown(dir, uid, gid)
  })

/** A session's downloads dir set up after its ready (`setUpAfterReady`). */
export interface DownloadsSetUp {
  /** Waited for by what could start a download (a client's connection, an action): false, it failed. */
  readonly done: Effect.Effect<boolean>
  /** The session's runtime has ended: its browser has exited, or its dir could not be set up. */
  readonly exited: Deferred.Deferred<void>
  /** Why it ended: `launch_failed` when its dir could not be set up, else the browser's own end. */
  readonly diedOf: Effect.Effect<"launch_failed" | undefined>
}

/**
 * The session's downloads dir (`dir`, the browser's user's): made, shown by
 * the browser's cell (`show`), and told to Chromium (`tell`), in the
 * background of the caller's scope, so a session is ready without waiting for
 * it. A download needs it only once one starts, and only a client or an
 * action can start one: they wait for `done`. Failed, the session's runtime
 * ends (`exited`, `launch_failed`). The dir is sealed when the scope closes.
 */
export const setUpAfterReady = (options: {
  readonly dir: string
  readonly profileDir: string
  readonly show: Effect.Effect<void, unknown>
  readonly tell: Effect.Effect<void, unknown>
  readonly browserExited: Deferred.Deferred<void>
}): Effect.Effect<DownloadsSetUp, never, Scope.Scope> =>
  Effect.gen(function* () {
    const setUp = yield* Deferred.make<void, unknown>()
    let failed = false
    yield* Effect.gen(function* () {
      yield* Effect.acquireRelease(prepare(options.dir, options.profileDir), () => seal(options.dir))
      // Side by side: one the cell's answer, the other Chromium's.
      yield* Effect.all([options.show, options.tell], { concurrency: "unbounded", discard: true })
    }).pipe(
      Effect.withSpan("session.downloads"),
      Effect.exit,
      Effect.flatMap((exit) => {
        failed = Exit.isFailure(exit)
        return Effect.andThen(
          failed ? Effect.logWarning("session.downloads_failed", { dir: options.dir, exit }) : Effect.void,
          Deferred.done(setUp, exit)
        )
      }),
      Effect.forkScoped
    )
    const exited = yield* Deferred.make<void>()
    // A defect (the dir's fs calls) fails it too.
    const setUpFailed = Effect.flatMap(Effect.exit(Deferred.await(setUp)), (exit) =>
      Exit.isFailure(exit) ? Effect.void : Effect.never
    )
    yield* Effect.raceFirst(Deferred.await(options.browserExited), setUpFailed).pipe(
      Effect.andThen(Deferred.succeed(exited, undefined)),
      Effect.forkScoped
    )
    return {
      done: Effect.map(Effect.exit(Deferred.await(setUp)), Exit.isSuccess),
      exited,
      diedOf: Effect.sync(() => (failed ? ("launch_failed" as const) : undefined))
    }
  })

/**
 * At the session's end: downloads still under way are dropped, and the dir
 * becomes the service's own (the browser's uid, which a later browser gets,
 * can no longer enter it). Its time says when the session ended.
 */
export const seal = (dir: string) =>
  Effect.gen(function* () {
    const entries = yield* fsCall(() => Fs.readdir(dir)).pipe(
      Effect.catchTag("FsFailed", passOver("downloads.seal_skipped", dir, undefined))
    )
    if (entries === undefined) return
    yield* Effect.promise(async () => {
      for (const name of entries) {
        if (name.endsWith(IN_PROGRESS)) await Fs.rm(Path.join(dir, name), { force: true, recursive: true })
      }
      const me = process.getuid?.()
      if (me !== undefined) await Fs.chown(dir, me, process.getgid?.() ?? me)
      await Fs.chmod(dir, 0o700)
      const now = new Date()
      await Fs.utimes(dir, now, now)
    })
  })

/**
 * Removes the downloads of sessions that ended more than `retentionMs` ago
 * (a dir not touched since), never those of a session still live here.
 */
export const sweep = (dataDir: string, retentionMs: number, isLive: (sessionId: string) => boolean) =>
  Effect.gen(function* () {
    const root = Path.join(dataDir, "downloads")
    const cutoff = Date.now() - retentionMs
    // None yet: no browser session has run on this node.
    const names = yield* fsCall(() => Fs.readdir(root)).pipe(
      Effect.catchTag("FsFailed", passOver<Array<string>>("downloads.sweep_skipped", root, []))
    )
    let removed = 0
    for (const name of names) {
      if (isLive(name.endsWith(UPLOADS_SUFFIX) ? name.slice(0, -UPLOADS_SUFFIX.length) : name)) continue
      const path = Path.join(root, name)
      const stat = yield* fsCall(() => Fs.lstat(path)).pipe(
        Effect.catchTag("FsFailed", passOver("downloads.sweep_skipped", path, undefined))
      )
      if (stat === undefined || stat.mtimeMs > cutoff) continue
      yield* Effect.promise(() => Fs.rm(path, { recursive: true, force: true, maxRetries: 3 }))
      removed++
    }
    return removed
  })

/** A download's file name: a plain name in the dir, no path (`..`, `/`, absolute) and no link. */
export const nameOk = (name: string) =>
  name !== "" &&
  name !== "." &&
  name !== ".." &&
  !name.includes("/") &&
  !name.includes("\0") &&
  name.length <= 255

/** The files a browser session downloaded so far (finished ones), newest first. */
export const list = (dir: string) =>
  Effect.gen(function* () {
    // None: the session's browser never ran here.
    const entries = yield* fsCall(() => Fs.readdir(dir, { withFileTypes: true })).pipe(
      Effect.catchTag("FsFailed", passOver("downloads.list_skipped", dir, []))
    )
    const files = []
    for (const entry of entries) {
      if (!entry.isFile() || entry.name.endsWith(IN_PROGRESS)) continue
      const path = Path.join(dir, entry.name)
      const stat = yield* fsCall(() => Fs.lstat(path)).pipe(
        Effect.catchTag("FsFailed", passOver("downloads.list_skipped", path, undefined))
      )
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
    const opened = yield* fsCall(() =>
      Fs.open(Path.join(dir, name), FsSync.constants.O_RDONLY | FsSync.constants.O_NOFOLLOW)
    ).pipe(
      Effect.catchTag("FsFailed", (error) =>
        Effect.fail(error.code === "ELOOP" ? new InvalidField({ field: "path" }) : new FileNotFound())
      )
    )
    const stat = yield* Effect.promise(() => opened.stat())
    if (!stat.isFile() || name.endsWith(IN_PROGRESS)) {
      yield* Effect.promise(() => opened.close())
      return yield* new FileNotFound()
    }
    const body = opened.readableWebStream() as ReadableStream<Uint8Array>
    return HttpServerResponse.stream(
      Stream.fromReadableStream({ evaluate: () => body, onError: (error) => error }).pipe(
        Stream.ensuring(
          fsCall(() => opened.close()).pipe(
            Effect.catchTag("FsFailed", passOver("downloads.close_failed", Path.join(dir, name), undefined))
          )
        ),
        Stream.orDie
      ),
      {
        contentType: "application/octet-stream",
        contentLength: stat.size,
        headers: { "content-disposition": `attachment; filename*=UTF-8''${encodeURIComponent(name)}` }
      }
    )
  })

const UPLOADS_SUFFIX = "-uploads"

/**
 * Where a browser session's uploads go: beside its downloads, the service's own (its browser reads
 * them, and can neither write nor replace them), the one place of the host a file input of the
 * session may be given a file from. Removed with the downloads, `DOWNLOAD_RETENTION_HOURS` after.
 */
export const uploadsDirOf = (dataDir: string, sessionId: string) =>
  Path.join(dataDir, "downloads", `${sessionId}${UPLOADS_SUFFIX}`)

/**
 * The session's uploads dir, made and shown to its browser by its cell at the first upload (a
 * session that uploads nothing costs nothing): the effect to ask each time, done once.
 */
export const uploadsShown = (cell: CellControl, dataDir: string, sessionId: string) =>
  Effect.cached(
    Effect.gen(function* () {
      const dir = uploadsDirOf(dataDir, sessionId)
      yield* Effect.promise(async () => {
        await Fs.mkdir(dir, { recursive: true, mode: 0o755 })
        await Fs.chmod(dir, 0o755)
      })
      yield* cell.show(Path.basename(dir))
      return dir
    })
  )

/**
 * `POST /v1/sessions/{id}/uploads` on the session's node: the multipart field `file` (its file name
 * the upload's name, or the field `name`), held until it is whole (16 MiB at most: one byte more is
 * 413 before anything is written), then written to a temporary name renamed into `dir`, the
 * session's uploads dir, readable by its browser. `UPLOADS_IN_FLIGHT` at once per session (its
 * `runtime`; 429 beyond).
 */
export const receiveUpload = (runtime: object, dir: string, request: HttpServerRequest.HttpServerRequest) =>
  Uploads.oneAtATime(
    runtime,
    Effect.gen(function* () {
      const { fields, file } = yield* Uploads.receive(request)
      if (file === undefined) return yield* new InvalidField({ field: "file" })
      const name = fields.get("name") ?? file.name ?? ""
      if (!nameOk(name) || name.startsWith(".")) return yield* new InvalidField({ field: "name" })
      const target = Path.join(dir, name)
      // A name of its own (a plain name may already be 255 bytes long), never one a caller chose.
      const temporary = Path.join(dir, `.upload-${Crypto.randomUUID()}`)
      yield* Effect.promise(async () => {
        await Fs.writeFile(temporary, file.chunks, { mode: 0o644 })
        await Fs.rename(temporary, target)
      })
      return { object: "upload" as const, name, path: target, size: file.size }
    })
  )

/** Removes this node's downloads of sessions ended `DOWNLOAD_RETENTION_HOURS` ago, hourly (and at start). */
export const layerRetention = Layer.effectDiscard(
  Effect.gen(function* () {
    const config = { ...(yield* NodeConfig), ...(yield* BrowserConfig) }
    const live = yield* LiveSessions
    yield* Housekeeping.every(
      { name: "downloads", interval: "1 hour", removed: (sessions) => ({ sessions }) },
      sweep(config.dataDir, config.downloadRetentionHours * 3_600_000, (id) => live.get(id)._tag === "Some")
    ).pipe(Effect.forkScoped)
  })
)
