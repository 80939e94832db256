import { Context, Effect, Layer, Schema, type Scope } from "effect"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { BlobsConfig, NodeConfig } from "../../platform/config/Config.ts"
import { BrowserConfig } from "./BrowserConfig.ts"
import * as Cell from "./Cell.ts"
import * as Cgroups from "./Cgroups.ts"
import { executableOf } from "./Chromium.ts"
import * as DirRemover from "./DirRemover.ts"
import { cellPlace, profilesPlace, removeCellLeftovers } from "./ProfilesPlace.ts"

export class IsolationError extends Schema.TaggedError<IsolationError>()("IsolationError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}

/** What each browser may use at most. */
export interface BrowserLimits {
  readonly memoryBytes: number
  /** Processes and threads (a cgroup's `pids.max`). */
  readonly tasks: number
  readonly openFiles: number
}

/** How this node confines its browsers, decided once at start (logged, and in docs/guides/browser-sessions.md). */
export interface IsolationInfo {
  /** Each browser under a uid of its own (the service runs as root), or under the service's user in a user namespace. */
  readonly user: "per-browser" | "service"
  /** Where memory and task limits are enforced. */
  readonly limits: Cgroups.Mechanism
  /** Parent of the profile dirs: traversable by the browsers' users, listable by none of them. */
  readonly profilesDir: string
  /** Fresh profiles are on a tmpfs (`memoryDir`). */
  readonly profilesInMemory: boolean
}

export type { Jail } from "./Cell.ts"

/** Where the per-browser uids start when `BROWSER_UID_BASE` is not set. */
export const DEFAULT_UID_BASE = 2_000_000_000
/** How many per-browser uids a node may hand out at once. */
export const UID_SLOTS = 4096

/** How much lower than the service's the browsers' CPU priority is. */
export const BROWSER_NICENESS = 10

/** The uid range `[base, base + UID_SLOTS)` if this user namespace maps it; else the top of what it maps. */
export const uidRange = (uidMap: string, preferred: number): number | undefined => {
  const ranges = uidMap
    .trim()
    .split("\n")
    .map((line) => line.trim().split(/\s+/).map(Number))
    .filter((parts) => parts.length === 3 && parts.every(Number.isFinite))
    .map(([inside, , count]) => ({ start: inside!, end: inside! + count! }))
  if (ranges.some((range) => preferred >= Math.max(range.start, 1000) && preferred + UID_SLOTS <= range.end))
    return preferred
  const widest = ranges.filter((range) => range.end - Math.max(range.start, 1000) >= UID_SLOTS * 2)
  const top = widest.sort((a, b) => b.end - a.end)[0]
  return top === undefined ? undefined : Math.min(top.end, 2 ** 31 - 1) - UID_SLOTS
}

/**
 * What a browser's view holds of the host besides its profile: Chromium's
 * installation and the libraries, fonts and settings it loads, read-only.
 * Not the data dir, the blob store, other browsers' profiles, the service's
 * secrets, or anyone's home: those are never bound, and hidden where one of
 * these trees holds them.
 */
const SYSTEM_VIEW = [
  "/usr",
  "/etc",
  "/bin",
  "/sbin",
  "/lib",
  "/lib32",
  "/lib64",
  "/libx32",
  "/var/cache/fontconfig"
]

const isUnder = (path: string, dir: string) =>
  path === dir || path.startsWith(dir.endsWith("/") ? dir : `${dir}/`)

const realpathOr = (path: string) => {
  try {
    return FsSync.realpathSync(path)
  } catch {
    return Path.resolve(path)
  }
}

/**
 * The read-only part of every browser's view on this node: `SYSTEM_VIEW` as
 * far as it exists, Chromium's own dir when it is elsewhere, and `secret`
 * paths hidden wherever one of those trees would show them.
 */
export const systemView = (chromeBinary: string, secret: ReadonlyArray<string>): Cell.View => {
  const shown = SYSTEM_VIEW.filter((path) => FsSync.existsSync(path))
  const resolved = shown.map(realpathOr)
  const chromeDir = Path.dirname(realpathOr(chromeBinary))
  const extra = resolved.some((dir) => isUnder(chromeDir, dir)) ? [] : [chromeDir]
  const trees = [...resolved, ...extra]
  const hidden = secret.map(realpathOr).filter((path) => trees.some((tree) => isUnder(path, tree)))
  return [
    ...[...shown, ...extra].map((path) => ({ _tag: "ReadOnly" as const, path })),
    ...hidden.map((path) => ({ _tag: "Hidden" as const, path }))
  ]
}

/**
 * Confines each browser in a cell of its own (`Cell.ts`): a network namespace
 * whose only way out is its egress proxy, a mount view of Chromium's files
 * and its own profile alone, a PID namespace; its own unprivileged user when
 * the service runs as root (else the service's, in a user namespace of its
 * own), Chromium's own sandbox (never `--no-sandbox`), memory and task limits
 * in a cgroup (or `RLIMIT_DATA` where no cgroup is writable), an open-files
 * limit, and an environment without the service's secrets.
 */
export class BrowserIsolation extends Context.Service<
  BrowserIsolation,
  {
    readonly info: IsolationInfo
    readonly limits: BrowserLimits
    /**
     * A jail with a fresh profile dir, or `profileDir` (kept) handed to the
     * jail's user. Closing the scope kills whatever still runs in the jail,
     * removes a fresh profile dir and the cell's dir, and frees the uid.
     */
    /** A jail on `profileDir` (a fresh one when absent), `shown` dirs of the host read-only in its view besides. */
    readonly enter: (
      profileDir?: string,
      shown?: ReadonlyArray<string>
    ) => Effect.Effect<Cell.Jail, IsolationError, Scope.Scope>
  }
>()("rbs/browser/BrowserIsolation") {
  static readonly layer = Layer.effect(
    BrowserIsolation,
    Effect.gen(function* () {
      const config = { ...(yield* NodeConfig), ...(yield* BrowserConfig), ...(yield* BlobsConfig) }
      const limits: BrowserLimits = config.browserLimits
      const asRoot = process.getuid?.() === 0
      const placed = profilesPlace(config.dataDir, config.browserProfilesInMemory)
      if (typeof placed === "string") return yield* Effect.die(new Error(placed))
      const { profilesDir, inMemory, tag } = placed
      const dataProfiles = Path.join(config.dataDir, "profiles")
      // Each browser's cell dir; those a crashed process left go now (its browsers are reaped next).
      const { base: cellBase, prefix: cellPrefix } = cellPlace(placed)
      yield* Effect.tryPromise(() => removeCellLeftovers(placed)).pipe(
        Effect.catch((error) =>
          Effect.logDebug("browser.cell_dirs_unread", { path: cellBase, reason: String(error.cause) })
        )
      )
      // Its own parent dir (on a tmpfs, or the machine's temp dir) goes when the node stops, once empty.
      if (profilesDir !== dataProfiles)
        yield* Effect.addFinalizer(() =>
          Effect.tryPromise(() => Fs.rmdir(profilesDir)).pipe(
            // Not empty (a browser's dir its teardown left), or gone already: it stays as it is.
            Effect.catch((error) =>
              Effect.logDebug("browser.profiles_dir_kept", { path: profilesDir, reason: String(error.cause) })
            )
          )
        )
      yield* Effect.promise(async () => {
        // The service's alone: a browser reaches its own profile through its cell, which binds it.
        await Fs.mkdir(profilesDir, { recursive: true, mode: 0o700 })
        await Fs.chmod(profilesDir, 0o700)
      })

      const uidBase = asRoot
        ? uidRange(
            yield* Effect.promise(() =>
              Fs.readFile("/proc/self/uid_map", "utf8").catch(() => "0 0 4294967295")
            ),
            config.browserUidBase
          )
        : undefined
      if (asRoot && uidBase === undefined) {
        return yield* Effect.die(
          new Error(
            "this user namespace maps too few uids to give each browser its own (set BROWSER_UID_BASE)"
          )
        )
      }
      const view = systemView(executableOf(config.chromePath), [
        config.dataDir,
        ...(config.blobStore._tag === "Directory" ? [config.blobStore.path] : [])
      ])
      const downloadsDir = Path.join(config.dataDir, "downloads")

      const cgroups = yield* Cgroups.open(tag)
      // The isolation's own: it lives past every browser's teardown, which removes its dirs through it.
      const remover = yield* DirRemover.make
      const info: IsolationInfo = {
        user: asRoot ? "per-browser" : "service",
        limits: cgroups === undefined ? "rlimit" : cgroups.mechanism,
        profilesDir,
        profilesInMemory: inMemory
      }
      yield* Effect.logInfo("browser.isolation", { ...info, sandbox: true, cell: true, ...limits })

      const usedSlots = new Set<number>()
      const takeSlot = Effect.sync(() => {
        for (let slot = 0; slot < UID_SLOTS; slot++) {
          if (!usedSlots.has(slot)) {
            usedSlots.add(slot)
            return slot
          }
        }
        return undefined
      })

      const enter = Effect.fn("BrowserIsolation.enter")(function* (
        kept?: string,
        shown: ReadonlyArray<string> = []
      ) {
        const slot = yield* Effect.acquireRelease(takeSlot, (slot) =>
          Effect.sync(() => slot !== undefined && usedSlots.delete(slot))
        )
        if (slot === undefined) return yield* new IsolationError({ message: "no free browser uid" })
        const uid = uidBase === undefined ? null : uidBase + slot
        // Made in place: a few metadata calls on a tmpfs (or a local disk), where trips through the
        // thread pool cost the service more than the calls themselves, on every launch.
        const profileDir =
          kept !== undefined
            ? yield* Effect.promise(() => Fs.mkdir(kept, { recursive: true })).pipe(Effect.as(kept))
            : yield* Effect.acquireRelease(
                Effect.sync(() => FsSync.mkdtempSync(Path.join(profilesDir, "chromium-"))),
                remover.remove
              )
        // The cell's sockets and its view's mount point, the service's alone. Short: a socket path
        // has 107 bytes.
        const cellDir = yield* Effect.acquireRelease(
          Effect.sync(() => {
            const dir = FsSync.mkdtempSync(Path.join(cellBase, cellPrefix))
            FsSync.chmodSync(dir, 0o700)
            FsSync.mkdirSync(Cell.rootOf(dir))
            return dir
          }),
          remover.remove
        )
        yield* Effect.tryPromise({
          try: async () => {
            // A kept profile may be large: handed over through the thread pool, off the event loop.
            if (uid !== null) {
              if (kept === undefined) FsSync.chownSync(profileDir, uid, uid)
              else await chownTree(profileDir, uid)
            }
            FsSync.chmodSync(profileDir, 0o700)
          },
          catch: (cause) =>
            new IsolationError({ message: "cannot hand the profile dir to the browser", cause })
        })
        const group =
          cgroups === undefined
            ? undefined
            : yield* Effect.acquireRelease(
                cgroups
                  .create(`b-${slot}`, limits)
                  .pipe(
                    Effect.mapError(
                      (cause) => new IsolationError({ message: "cannot create the browser's cgroup", cause })
                    )
                  ),
                (group) => group.destroy
              )

        const spec: Cell.CellSpec = {
          dir: cellDir,
          uid,
          openFiles: limits.openFiles,
          dataBytes: group === undefined ? limits.memoryBytes : 0,
          tmpBytes: limits.memoryBytes,
          // Below the service and its database: browsers never starve the control plane.
          niceness: BROWSER_NICENESS,
          cgroupProcs: group?.procsFiles ?? [],
          view: [
            ...view,
            ...shown.map((path) => ({ _tag: "ReadOnly" as const, path })),
            { _tag: "Writable", path: profileDir }
          ],
          downloadsDir
        }
        const env: Record<string, string> = {
          ...config.browserEnv,
          PATH: "/usr/local/bin:/usr/bin:/bin",
          HOME: profileDir,
          XDG_CONFIG_HOME: Path.join(profileDir, ".config"),
          XDG_CACHE_HOME: Path.join(profileDir, ".cache"),
          TMPDIR: "/tmp"
        }
        return {
          uid,
          profileDir,
          cellDir,
          command: (file, args) => Cell.command(spec, file, args),
          env
        } satisfies Cell.Jail
      })

      return BrowserIsolation.of({ info, limits, enter })
    })
  )
}

/** Hands a dir and everything in it (a kept profile) to `uid`. */
const chownTree = async (dir: string, uid: number): Promise<void> => {
  await Fs.chown(dir, uid, uid)
  for (const entry of await Fs.readdir(dir, { withFileTypes: true })) {
    const path = Path.join(dir, entry.name)
    if (entry.isDirectory()) await chownTree(path, uid)
    else await Fs.lchown(path, uid, uid)
  }
}
