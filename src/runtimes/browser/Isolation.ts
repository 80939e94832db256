import { Context, Effect, Layer, Schema, type Scope } from "effect"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as Url from "node:url"
import { NodeConfig } from "../../platform/config/Config.ts"
import { BrowserConfig } from "./BrowserConfig.ts"
import * as Cgroups from "./Cgroups.ts"
import * as DirRemover from "./DirRemover.ts"
import { profilesPlace, removeTempLeftovers, tempPlace } from "./ProfilesPlace.ts"

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
  /** Each browser under a uid of its own (the service runs as root), or under the service's user. */
  readonly user: "per-browser" | "service"
  /** Where memory and task limits are enforced. */
  readonly limits: Cgroups.Mechanism
  /** Parent of the profile dirs: traversable by the browsers' users, listable by none of them. */
  readonly profilesDir: string
  /** Fresh profiles (and the browsers' temp dirs) are on a tmpfs (`memoryDir`). */
  readonly profilesInMemory: boolean
}

/** One browser's confinement, for one launch; its scope undoes all of it. */
export interface Jail {
  /** The browser's own user, or `null` for the service's. */
  readonly uid: number | null
  /** Its profile dir, created for it and readable by it alone. */
  readonly profileDir: string
  /** The command that starts `file args` inside the jail. */
  readonly command: (file: string, args: ReadonlyArray<string>) => { file: string; args: Array<string> }
  /** The browser's whole environment: nothing of the service's (no secrets), its home in its profile. */
  readonly env: Record<string, string>
}

/** Where the per-browser uids start when `BROWSER_UID_BASE` is not set. */
export const DEFAULT_UID_BASE = 2_000_000_000
/** How many per-browser uids a node may hand out at once. */
export const UID_SLOTS = 4096

/** The jail's one exec (`native/jail-exec.c`), from src/ and from a build in dist/ alike. */
export const JAIL_EXEC = Url.fileURLToPath(new URL("../../../native/build/rbs-jail-exec", import.meta.url))

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
 * Confines each browser: its own unprivileged user (when the service runs as
 * root), a profile dir only that user can read, Chromium's own sandbox (never
 * `--no-sandbox`), memory and task limits in a cgroup (or `RLIMIT_DATA` where
 * no cgroup is writable), an open-files limit, and an environment without the
 * service's secrets.
 */
export class BrowserIsolation extends Context.Service<
  BrowserIsolation,
  {
    readonly info: IsolationInfo
    readonly limits: BrowserLimits
    /**
     * A jail with a fresh profile dir, or `profileDir` (kept) handed to the
     * jail's user. Closing the scope kills whatever still runs in the jail,
     * removes a fresh profile dir and frees the uid.
     */
    readonly enter: (profileDir?: string) => Effect.Effect<Jail, IsolationError, Scope.Scope>
  }
>()("rbs/browser/BrowserIsolation") {
  static readonly layer = Layer.effect(
    BrowserIsolation,
    Effect.gen(function* () {
      const config = { ...(yield* NodeConfig), ...(yield* BrowserConfig) }
      const limits: BrowserLimits = config.browserLimits
      const asRoot = process.getuid?.() === 0
      const placed = profilesPlace(config.dataDir, config.browserProfilesInMemory)
      if (typeof placed === "string") return yield* Effect.die(new Error(placed))
      const { profilesDir, inMemory, tag } = placed
      const dataProfiles = Path.join(config.dataDir, "profiles")
      // Each browser's temp dir; those a crashed process left go now (its browsers are reaped next).
      const { base: tempBase, prefix: tempPrefix } = tempPlace(placed)
      yield* Effect.tryPromise(() => removeTempLeftovers(placed)).pipe(
        Effect.catch((error) =>
          Effect.logDebug("browser.temp_dirs_unread", { path: tempBase, reason: String(error.cause) })
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
        await Fs.mkdir(profilesDir, { recursive: true })
        // Browsers pass through to their own dir; none may list the others.
        if (asRoot) await Fs.chmod(profilesDir, 0o711)
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
      const setpriv = asRoot ? yield* Effect.promise(() => which("setpriv")) : undefined
      if (asRoot && setpriv === undefined) {
        return yield* Effect.die(
          new Error("setpriv (util-linux) is needed to start browsers as their own users")
        )
      }
      const prlimit = yield* Effect.promise(() => which("prlimit"))
      // One exec into the jail (native/jail-exec.c, built by the set-up) instead of sh, setpriv, prlimit and nice.
      const jailExec = yield* Effect.promise(() =>
        Fs.access(JAIL_EXEC, FsSync.constants.X_OK).then(
          () => JAIL_EXEC,
          () => undefined
        )
      )

      const cgroups = yield* Cgroups.open(tag)
      // The isolation's own: it lives past every browser's teardown, which removes its dirs through it.
      const remover = yield* DirRemover.make
      const info: IsolationInfo = {
        user: asRoot ? "per-browser" : "service",
        limits: cgroups === undefined ? "rlimit" : cgroups.mechanism,
        profilesDir,
        profilesInMemory: inMemory
      }
      yield* Effect.logInfo("browser.isolation", { ...info, sandbox: true, ...limits })

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

      const enter = Effect.fn("BrowserIsolation.enter")(function* (kept?: string) {
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
        // Chromium's own temp dirs (org.chromium.Chromium.*, its singleton socket among them) in a dir
        // of the browser's that goes with it, even after a SIGKILL. Short: a socket path has 107 bytes.
        const tempDir = yield* Effect.acquireRelease(
          Effect.sync(() => FsSync.mkdtempSync(Path.join(tempBase, tempPrefix))),
          remover.remove
        )
        yield* Effect.tryPromise({
          try: async () => {
            if (uid !== null) FsSync.chownSync(tempDir, uid, uid)
            FsSync.chmodSync(tempDir, 0o700)
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

        const command = (file: string, args: ReadonlyArray<string>) => {
          if (jailExec !== undefined) {
            const procs = group?.procsFiles ?? []
            const data = group === undefined ? limits.memoryBytes : 0
            const head = [uid ?? -1, limits.openFiles, data, BROWSER_NICENESS, procs.length].map(String)
            return { file: jailExec, args: [...head, ...procs, "--", file, ...args] }
          }
          // Below the service and its database: browsers never starve the control plane.
          let line = ["/usr/bin/nice", `-n${BROWSER_NICENESS}`, file, ...args]
          if (prlimit !== undefined) {
            const data = group === undefined ? [`--data=${limits.memoryBytes}:${limits.memoryBytes}`] : []
            line = [prlimit, `--nofile=${limits.openFiles}:${limits.openFiles}`, ...data, "--", ...line]
          }
          if (uid !== null) {
            line = [
              setpriv!,
              `--reuid=${uid}`,
              `--regid=${uid}`,
              "--clear-groups",
              "--no-new-privs",
              "--",
              ...line
            ]
          }
          // Joined before anything else runs, so every process the browser ever forks is inside.
          if (group !== undefined) {
            line = [
              "/bin/sh",
              "-c",
              'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 111; shift; n=$((n-1)); done; exec "$@"',
              "rbs-jail",
              String(group.procsFiles.length),
              ...group.procsFiles,
              ...line
            ]
          }
          return { file: line[0]!, args: line.slice(1) }
        }

        const env: Record<string, string> = {
          ...config.browserEnv,
          PATH: "/usr/local/bin:/usr/bin:/bin",
          HOME: profileDir,
          XDG_CONFIG_HOME: Path.join(profileDir, ".config"),
          XDG_CACHE_HOME: Path.join(profileDir, ".cache"),
          TMPDIR: tempDir
        }
        return { uid, profileDir, command, env } satisfies Jail
      })

      return BrowserIsolation.of({ info, limits, enter })
    })
  )
}

const which = async (name: string): Promise<string | undefined> => {
  for (const dir of ["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"]) {
    const path = Path.join(dir, name)
    try {
      await Fs.access(path, FsSync.constants.X_OK)
      return path
    } catch {
      // next
    }
  }
  return undefined
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
