import * as Crypto from "node:crypto"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"

/**
 * Where fresh profiles go when they go to memory. A profile is written as the
 * browser starts (about 2 MB in 130 files) and removed when it ends: on a disk
 * that is a fifth of a launch's CPU (journal, writeback, unlinks), on a tmpfs
 * none of it (`npm run bench:cost`).
 */
export const MEMORY_DIR = "/dev/shm"
const TMPFS_MAGIC = 0x01021994
/** Room a tmpfs needs for `BROWSER_PROFILES_IN_MEMORY` unset to pick it (a container's 64 MB /dev/shm has not). */
const MEMORY_DIR_MIN_BYTES = 1024 ** 3
/** The HTTP cache's cap for a profile in memory (charged to the browser's own memory limit). */
export const MEMORY_PROFILE_CACHE_BYTES = 64 * 1024 ** 2

/** Whether `dir` is a tmpfs, and the bytes available there. */
const tmpfsRoom = (dir: string): number | undefined => {
  try {
    const stats = FsSync.statfsSync(dir)
    return stats.type === TMPFS_MAGIC ? stats.bavail * stats.bsize : undefined
  } catch {
    return undefined
  }
}

/** `BROWSER_PROFILES_IN_MEMORY` decided: `true` wants a tmpfs at `MEMORY_DIR`; unset takes one with room. */
export const profilesInMemory = (setting: boolean | undefined, dir = MEMORY_DIR): boolean | string => {
  if (setting === false) return false
  const room = tmpfsRoom(dir)
  if (setting === true)
    return room === undefined ? `BROWSER_PROFILES_IN_MEMORY=true needs a tmpfs at ${dir}` : true
  return room !== undefined && room >= MEMORY_DIR_MIN_BYTES
}

/**
 * Where a node's fresh profiles go: on the tmpfs (`profilesInMemory`), else in
 * the data dir (each browser's cell binds its own, so no browser needs a way
 * through the data dir's parents). `tag` (one per data dir) keeps two services
 * on one machine apart, and lets a restart find its leftovers.
 */
export const profilesPlace = (dataDir: string, inMemorySetting: boolean | undefined) => {
  const dataProfiles = Path.join(dataDir, "profiles")
  const tag = Crypto.createHash("sha256").update(dataProfiles).digest("hex").slice(0, 12)
  const inMemory = profilesInMemory(inMemorySetting)
  if (typeof inMemory === "string") return inMemory
  const profilesDir = inMemory ? Path.join(MEMORY_DIR, `rbs-profiles-${tag}`) : dataProfiles
  return { profilesDir, inMemory, tag }
}

/**
 * Where each browser's cell dir goes (its sockets, its view's mount point):
 * `<base>/<prefix>XXXXXX`, beside its profile's medium, on a short path (a
 * socket's has 107 bytes).
 */
export const cellPlace = (placed: { readonly inMemory: boolean; readonly tag: string }) => ({
  base: placed.inMemory ? MEMORY_DIR : Os.tmpdir(),
  prefix: `rbs-cell-${placed.tag}-`
})

/**
 * Removes the cell dirs a node that died left, the temp dirs (`rbs-tmp-`) its
 * browsers had before they had cells, and its profiles' own parent in memory
 * once it is empty (rejects when their parent cannot be read); returns how
 * many dirs it removed.
 */
export const removeCellLeftovers = async (placed: {
  readonly inMemory: boolean
  readonly tag: string
  readonly profilesDir: string
}) => {
  const { base, prefix } = cellPlace(placed)
  const left = (await Fs.readdir(base)).filter(
    (name) => name.startsWith(prefix) || name.startsWith(`rbs-tmp-${placed.tag}-`)
  )
  for (const name of left) await Fs.rm(Path.join(base, name), { recursive: true, force: true })
  // Not empty (a browser's profile its teardown left, or a node running on it), or none: it stays.
  if (placed.inMemory) await Fs.rmdir(placed.profilesDir).catch(() => undefined)
  return left.length
}
