import { Effect, Schema } from "effect"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as FsSync from "node:fs"
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

const randomName = (prefix: string) => `${prefix}-${Crypto.randomBytes(6).toString("hex")}`

/** What makes a workspace's own file system (e2fsprogs). */
export const MKFS = "/usr/sbin/mkfs.ext4"

/** Each workspace a file system of its own, `bytes` large, its image in `dir`. */
export interface DiskImages {
  readonly dir: string
  readonly bytes: number
}

const exec = (file: string, args: ReadonlyArray<string>) =>
  new Promise<void>((resolve, reject) =>
    ChildProcess.execFile(file, args, (error, _stdout, stderr) =>
      error === null
        ? resolve()
        : reject(new Error(`${Path.basename(file)}: ${stderr.trim() || error.message}`))
    )
  )

const mountPoints = () =>
  new Set(
    FsSync.readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((line) => line.split(" ")[4] ?? "")
  )

/** Unmounts `at` and whatever is mounted below it, deepest first; returns how many. */
export const unmount = async (at: string) => {
  const points = [...mountPoints()].filter((point) => point === at || point.startsWith(`${at}/`))
  // Deepest first: a copy's mount inside its workspace's before the workspace's.
  for (const point of points.sort((a, b) => b.length - a.length))
    await exec("/usr/bin/umount", ["--lazy", point]).catch(() => undefined)
  return points.length
}

/**
 * The workspaces on this node's disk, under `root` (`DATA_DIR/workspaces`).
 * A workspace is `<root>/<id>/current`, a symlink to one generation
 * (`gen-<random>`) of its content. Its content is only ever replaced by
 * making a new generation beside it and renaming a new symlink over
 * `current`, which `rename(2)` does atomically: whenever the process stops,
 * `current` names the old generation or the new one, never a mix.
 * `recover` removes what a stopped process left half-made.
 *
 * With `images` (root, loop devices, `WORKSPACE_DISK_MB`), `<root>/<id>` is
 * an ext4 file system of its own (`<images.dir>/<id>.img`, sparse, mounted
 * through a loop device while the node runs), so a session writing into its
 * home meets ENOSPC at `images.bytes` and nothing else fills. A restore
 * unpacks into a new image and renames it over the old one (as atomic as the
 * link); a copy for a session without persistence is an image of its own.
 * Workspaces made before images were on keep their plain dir.
 */
export const make = (root: string, images?: DiskImages) => {
  const dirOf = (id: string) => Path.join(root, id)
  const linkOf = (id: string) => Path.join(dirOf(id), "current")
  const imageOf = (name: string) => Path.join(images!.dir, `${name}.img`)

  /** A new sparse image of `images.bytes` with an empty ext4 file system (a small journal, nothing reserved). */
  const makeImage = async (file: string) => {
    await Fs.mkdir(images!.dir, { recursive: true, mode: 0o700 })
    const handle = await Fs.open(file, "wx", 0o600)
    try {
      await handle.truncate(images!.bytes)
    } finally {
      await handle.close()
    }
    await exec(MKFS, [
      "-q",
      "-F",
      "-m",
      "0",
      "-J",
      `size=${images!.bytes < 1024 ** 3 ? 4 : 16}`,
      "-E",
      "nodiscard,lazy_itable_init=1,lazy_journal_init=1",
      file
    ])
  }

  const mountAt = async (file: string, at: string) => {
    await Fs.mkdir(at, { recursive: true })
    if (mountPoints().has(at)) return
    await exec("/usr/bin/mount", ["-o", "loop,discard,nosuid,nodev,noatime", file, at])
    // A fresh file system's lost+found is no file of the workspace's (fsck makes it again if it needs it).
    await Fs.rmdir(Path.join(at, "lost+found")).catch(() => undefined)
  }

  /** The workspace's file system, made when it has none yet, mounted at its dir. */
  const attach = (id: string) =>
    attempt("mounting the workspace's disk", async () => {
      if (images === undefined) return
      const file = imageOf(id)
      const plain = !FsSync.existsSync(file) && FsSync.existsSync(linkOf(id))
      if (plain) return
      if (!FsSync.existsSync(file)) await makeImage(file)
      await mountAt(file, dirOf(id))
    })

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
      const link = Path.join(dirOf(id), randomName("current.tmp"))
      await Fs.symlink(Path.basename(generation), link)
      await Fs.rename(link, linkOf(id))
      if (before !== undefined && before !== generation) await Fs.rm(before, { recursive: true, force: true })
    })

  /** A new, empty generation dir of the workspace (not yet `current`). */
  const stage = (id: string) =>
    attempt("making the workspace's dir", async () => {
      const dir = Path.join(dirOf(id), randomName("gen"))
      await Fs.mkdir(dir, { recursive: true, mode: 0o755 })
      return dir
    })

  /** An empty workspace (a no-op when it exists). */
  const ensure = (id: string) =>
    Effect.gen(function* () {
      yield* attach(id)
      if (!(yield* exists(id))) yield* point(id, yield* stage(id))
      return yield* current(id)
    })

  /** A copy of `from`'s content as `to`'s: a reflink (constant time) where the filesystem has them, else a copy. */
  const clone = (from: string, to: string) =>
    Effect.gen(function* () {
      const source = yield* current(from)
      yield* attach(to)
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
      if (images !== undefined) {
        const file = imageOf(`${id}-scratch-${sessionId}`)
        yield* attempt("making the copy's disk", async () => {
          await Fs.rm(file, { force: true })
          await makeImage(file)
          await mountAt(file, target)
        })
      }
      yield* run("/bin/cp", ["-a", "--reflink=auto", `${source}/.`, target]).pipe(
        Effect.onExit((exit) => (exit._tag === "Success" ? Effect.void : discard(target)))
      )
      return target
    })

  /** A generation or a copy, gone: unmounted first (a copy's own disk, its image removed with it). */
  const discard = (dir: string) =>
    Effect.promise(async () => {
      await unmount(dir)
      await Fs.rm(dir, { recursive: true, force: true })
      const copy = /^scratch-(.+)$/.exec(Path.basename(dir))
      if (images !== undefined && copy !== null)
        await Fs.rm(imageOf(`${Path.basename(Path.dirname(dir))}-scratch-${copy[1]}`), { force: true })
    })

  const remove = (id: string) =>
    Effect.andThen(
      discard(dirOf(id)),
      Effect.promise(async () => {
        if (images === undefined) return
        for (const name of await Fs.readdir(images.dir).catch(() => [] as Array<string>))
          if (name === `${id}.img` || name.startsWith(`${id}-scratch-`))
            await Fs.rm(Path.join(images.dir, name), { force: true })
      })
    )

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
    images === undefined || (FsSync.existsSync(linkOf(id)) && !FsSync.existsSync(imageOf(id)))
      ? restoreInPlace(id, file)
      : restoreImage(id, file)

  /**
   * A restore on images: the content unpacked into a new image beside the old
   * one (mounted apart meanwhile), which is then renamed over it and mounted
   * in its place. Stopped halfway, the old image is whole (and `recover`
   * removes the new one). Its file system need not hold both contents.
   */
  const restoreImage = (id: string, file: string) =>
    Effect.gen(function* () {
      const next = imageOf(`${id}.new`)
      const at = Path.join(images!.dir, `${id}.mnt`)
      yield* attempt("making the workspace's new disk", async () => {
        await unmount(at)
        await Fs.rm(next, { force: true })
        await makeImage(next)
        await mountAt(next, at)
      })
      const unpack = Effect.gen(function* () {
        const target = yield* attempt("making the workspace's dir", async () => {
          const dir = Path.join(at, randomName("gen"))
          await Fs.mkdir(dir, { mode: 0o755 })
          await Fs.symlink(Path.basename(dir), Path.join(at, "current"))
          return dir
        })
        yield* run("/usr/bin/tar", ["-C", target, "--numeric-owner", "-I", "zstd -q -d", "-xf", file])
      })
      yield* unpack.pipe(
        Effect.ensuring(Effect.promise(() => unmount(at).then(() => Fs.rmdir(at).catch(() => undefined)))),
        Effect.onExit((exit) =>
          exit._tag === "Success" ? Effect.void : Effect.promise(() => Fs.rm(next, { force: true }))
        )
      )
      yield* attempt("switching the workspace's disk", async () => {
        await unmount(dirOf(id))
        await Fs.rename(next, imageOf(id))
        await mountAt(imageOf(id), dirOf(id))
      })
    })

  const restoreInPlace = (id: string, file: string) =>
    Effect.gen(function* () {
      const target = yield* stage(id)
      yield* run("/usr/bin/tar", ["-C", target, "--numeric-owner", "-I", "zstd -q -d", "-xf", file]).pipe(
        Effect.andThen(point(id, target)),
        // Failed or interrupted: the half-unpacked generation goes (`current` still names the old one).
        Effect.onExit((exit) => (exit._tag === "Success" ? Effect.void : discard(target)))
      )
    })

  /**
   * What a process that stopped mid-operation left: generations `current`
   * does not name, scratch copies, links, half-made images; then every
   * workspace's disk mounted again.
   */
  const recover = attempt("recovering workspaces", async () => {
    if (images !== undefined) {
      for (const name of await Fs.readdir(images.dir).catch(() => [] as Array<string>)) {
        const path = Path.join(images.dir, name)
        if (name.endsWith(".mnt")) {
          await unmount(path)
          await Fs.rm(path, { recursive: true, force: true })
        } else if (name.endsWith(".new.img")) {
          await Fs.rm(path, { force: true })
        } else if (name.includes("-scratch-")) {
          // A copy for a session without persistence that ended with the process.
          const [id, session] = name.slice(0, -4).split("-scratch-")
          await unmount(Path.join(dirOf(id!), `scratch-${session}`))
          await Fs.rm(path, { force: true })
        }
      }
      for (const name of await Fs.readdir(images.dir).catch(() => [] as Array<string>)) {
        if (name.endsWith(".img")) await mountAt(Path.join(images.dir, name), dirOf(name.slice(0, -4)))
      }
    }
    const ids = await Fs.readdir(root).catch(() => [] as Array<string>)
    let removed = 0
    for (const id of ids) {
      const keep = await Fs.realpath(linkOf(id)).catch(() => undefined)
      for (const entry of await Fs.readdir(dirOf(id)).catch(() => [] as Array<string>)) {
        const path = Path.join(dirOf(id), entry)
        if (entry === "current" || path === keep || entry === "lost+found") continue
        await unmount(path)
        await Fs.rm(path, { recursive: true, force: true })
        removed++
      }
    }
    return removed
  })

  /** Every workspace's disk unmounted (the node stopping; its sessions are gone). */
  const detachAll = Effect.promise(async () => {
    if (images === undefined) return
    for (const name of await Fs.readdir(root).catch(() => [] as Array<string>)) await unmount(dirOf(name))
  })

  return {
    root,
    detachAll,
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
