import { Effect, Schema } from "effect"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"

/** A disk operation failed (a copy, an archive, the disk full): the request that met it fails. */
export class DiskError extends Schema.TaggedError<DiskError>()("DiskError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

/** zstd's level and threads for snapshots: level 3 (its default) on every core. */
export const ZSTD = "zstd -q -T0 -3"

const run = (file: string, args: ReadonlyArray<string>) =>
  Effect.callback<void, DiskError>((resume) => {
    const child = ChildProcess.execFile(file, args, { maxBuffer: 1024 * 1024 }, (error, _stdout, stderr) => {
      if (error === null) resume(Effect.void)
      else
        resume(
          Effect.fail(
            new DiskError({ message: `${Path.basename(file)} failed: ${stderr.trim() || error.message}` })
          )
        )
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const attempt = <A>(what: string, f: () => Promise<A>) =>
  Effect.tryPromise({
    try: f,
    catch: (cause) => new DiskError({ message: `${what}: ${String(cause)}`, cause })
  })

const fresh = (prefix: string) => `${prefix}-${Crypto.randomBytes(6).toString("hex")}`

/**
 * The workspaces on this node's disk, under `root` (`DATA_DIR/workspaces`).
 * A workspace is `<root>/<id>/current`, a symlink to one generation
 * (`gen-<random>`) of its content. Its content is only ever replaced by
 * making a new generation beside it and renaming a new symlink over
 * `current`, which `rename(2)` does atomically: whenever the process stops,
 * `current` names the old generation or the new one, never a mix.
 * `recover` removes what a stopped process left half-made.
 */
export const make = (root: string) => {
  const dirOf = (id: string) => Path.join(root, id)
  const linkOf = (id: string) => Path.join(dirOf(id), "current")

  const exists = (id: string) =>
    Effect.promise(() =>
      Fs.stat(linkOf(id)).then(
        () => true,
        () => false
      )
    )

  /** The generation `current` names now (an absolute path). */
  const current = (id: string) => attempt("the workspace's disk", () => Fs.realpath(linkOf(id)))

  /** Points `current` at `generation` (a dir in the workspace's own dir) at once, and removes the one before. */
  const point = (id: string, generation: string) =>
    attempt("switching the workspace's content", async () => {
      const before = await Fs.realpath(linkOf(id)).catch(() => undefined)
      const link = Path.join(dirOf(id), fresh("current.tmp"))
      await Fs.symlink(Path.basename(generation), link)
      await Fs.rename(link, linkOf(id))
      if (before !== undefined && before !== generation) await Fs.rm(before, { recursive: true, force: true })
    })

  /** A new, empty generation dir of the workspace (not yet `current`). */
  const stage = (id: string) =>
    attempt("making the workspace's dir", async () => {
      const dir = Path.join(dirOf(id), fresh("gen"))
      await Fs.mkdir(dir, { recursive: true, mode: 0o755 })
      return dir
    })

  /** An empty workspace (a no-op when it exists). */
  const ensure = (id: string) =>
    Effect.gen(function* () {
      if (!(yield* exists(id))) yield* point(id, yield* stage(id))
      return yield* current(id)
    })

  /** A copy of `from`'s content as `to`'s: a reflink (constant time) where the filesystem has them, else a copy. */
  const clone = (from: string, to: string) =>
    Effect.gen(function* () {
      const source = yield* current(from)
      const target = yield* stage(to)
      yield* run("/bin/cp", ["-a", "--reflink=auto", `${source}/.`, target]).pipe(
        Effect.andThen(point(to, target)),
        Effect.onExit((exit) => (exit._tag === "Success" ? Effect.void : discard(target)))
      )
    })

  /** A throw-away copy of the content, for a session without persistence; removed by `discard`. */
  const scratch = (id: string, sessionId: string) =>
    Effect.gen(function* () {
      const source = yield* current(id)
      const target = Path.join(dirOf(id), `scratch-${sessionId}`)
      yield* run("/bin/cp", ["-a", "--reflink=auto", `${source}/.`, target]).pipe(
        Effect.onExit((exit) => (exit._tag === "Success" ? Effect.void : discard(target)))
      )
      return target
    })

  const discard = (dir: string) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))

  const remove = (id: string) => discard(dirOf(id))

  /** Bytes of the content (apparent sizes, as `du -sb`). */
  const usedBytes = (id: string) =>
    Effect.gen(function* () {
      const dir = yield* current(id)
      const output = yield* Effect.callback<string, DiskError>((resume) => {
        const child = ChildProcess.execFile("/usr/bin/du", ["-sb", dir], (error, stdout, stderr) =>
          resume(
            error === null
              ? Effect.succeed(stdout)
              : Effect.fail(new DiskError({ message: `du failed: ${stderr.trim() || error.message}` }))
          )
        )
        return Effect.sync(() => child.kill("SIGKILL"))
      })
      return Number(output.split(/\s/)[0] ?? 0)
    })

  /** The content as a tar archive compressed with zstd, written to `file`. */
  const archive = (id: string, file: string) =>
    Effect.gen(function* () {
      const dir = yield* current(id)
      yield* run("/usr/bin/tar", ["-C", dir, "--numeric-owner", "-I", ZSTD, "-cf", file, "."])
    })

  /**
   * Makes the content of `file` (an `archive`) the workspace's, atomically:
   * unpacked into a new generation, which then replaces `current`. Stopped
   * halfway, the workspace keeps its old content (and `recover` removes the
   * half-unpacked generation).
   */
  const restore = (id: string, file: string) =>
    Effect.gen(function* () {
      const target = yield* stage(id)
      yield* run("/usr/bin/tar", ["-C", target, "--numeric-owner", "-I", "zstd -q -d", "-xf", file]).pipe(
        Effect.andThen(point(id, target)),
        // Failed or interrupted: the half-unpacked generation goes (`current` still names the old one).
        Effect.onExit((exit) => (exit._tag === "Success" ? Effect.void : discard(target)))
      )
    })

  /** What a process that stopped mid-operation left: generations `current` does not name, scratch copies, links. */
  const recover = attempt("recovering workspaces", async () => {
    const ids = await Fs.readdir(root).catch(() => [] as Array<string>)
    let removed = 0
    for (const id of ids) {
      const keep = await Fs.realpath(linkOf(id)).catch(() => undefined)
      for (const entry of await Fs.readdir(dirOf(id)).catch(() => [] as Array<string>)) {
        const path = Path.join(dirOf(id), entry)
        if (entry === "current" || path === keep) continue
        await Fs.rm(path, { recursive: true, force: true })
        removed++
      }
    }
    return removed
  })

  return {
    root,
    dirOf,
    exists,
    current,
    ensure,
    clone,
    scratch,
    discard,
    remove,
    usedBytes,
    archive,
    restore,
    recover
  }
}

export type WorkspaceDisk = ReturnType<typeof make>
