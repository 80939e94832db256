import * as Fs from "node:fs/promises"
import * as Path from "node:path"

/**
 * The node's data dir and what it holds (tenant data at rest: blobs,
 * workspaces, recordings and their spools, downloads, job results, the
 * secrets) are the service's alone, whatever the umask: dirs it makes are
 * `0700`, files `0600`. The one other user that may pass through the data
 * dir is the `postgres` user an embedded Postgres runs as when the service
 * is root: the data dir and its `postgres` dir are then `0710` with that
 * user's group, and nothing else of it is open to that group.
 */
export const PRIVATE_DIR = 0o700
export const PRIVATE_FILE = 0o600
/** Passed through (not listed) by one group: the embedded Postgres's, as root. */
const GROUP_PASSES = 0o710

/** The embedded Postgres's own dir in the data dir. */
export const POSTGRES_DIR = "postgres"

/**
 * Makes `dir` the service's own (`0700`), and every missing dir between `under` and it; one already
 * there keeps its mode. `under` and what is missing above it are made as the umask has them: they
 * may be above the data dir, where another user (an embedded Postgres's) must pass through.
 */
export const makePrivate = async (dir: string, under: string = Path.dirname(dir)) => {
  await Fs.mkdir(under, { recursive: true })
  const below = Path.relative(under, dir)
  if (below === "" || below.startsWith("..")) return
  let current = under
  for (const part of below.split(Path.sep)) {
    current = Path.join(current, part)
    await Fs.mkdir(current, { mode: PRIVATE_DIR }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "EEXIST") throw error
    })
  }
}

/** `file` with `data`, readable by the service alone (replacing what was there). */
export const writePrivate = (file: string, data: string | Uint8Array) =>
  Fs.writeFile(file, data, { mode: PRIVATE_FILE }).then(() => Fs.chmod(file, PRIVATE_FILE))

/** `dir` the service's alone (`0700`), or passed through by `gid`'s group as well (`0710`). */
export const passableBy = async (dir: string, gid: number | undefined) => {
  if (gid === undefined) return Fs.chmod(dir, PRIVATE_DIR)
  await Fs.chown(dir, process.getuid?.() ?? 0, gid)
  await Fs.chmod(dir, GROUP_PASSES)
}

/**
 * Makes the data dir, and gives what it holds back to the service alone: the
 * dir `0700` (`0710` with `postgresGid`'s group, for an embedded Postgres run
 * as the `postgres` user), each entry in it `0700` or `0600`, so what an
 * earlier version or another umask left open is closed at start.
 */
export const secure = async (dataDir: string, postgresGid?: number) => {
  await makePrivate(dataDir)
  await passableBy(dataDir, postgresGid)
  for (const entry of await Fs.readdir(dataDir, { withFileTypes: true })) {
    const path = Path.join(dataDir, entry.name)
    if (entry.isSymbolicLink()) continue
    if (entry.name === POSTGRES_DIR && entry.isDirectory()) await passableBy(path, postgresGid)
    else if (entry.isDirectory()) await Fs.chmod(path, PRIVATE_DIR)
    // A socket or another special file keeps its own mode (its owner set it).
    else if (entry.isFile()) await Fs.chmod(path, PRIVATE_FILE)
  }
}
