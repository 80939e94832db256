import * as Path from "node:path"

/** Where relative paths in a sandbox start: its root's home. */
export const SANDBOX_HOME = "/root"

/**
 * A path inside a sandbox as an absolute, normalized path, or `undefined`
 * when it is no path there: empty, longer than 4096 bytes, holding U+0000,
 * or climbing above `/` with `..` (refused, never clamped, so a client
 * learns its path was wrong instead of reading another file). Relative paths
 * start at the home. The sandbox's own root is all there is to resolve in:
 * the supervisor opens the path inside the container, so no symlink in it
 * can lead to a file of the host.
 */
export const resolveInSandbox = (path: string, base = SANDBOX_HOME): string | undefined => {
  if (path === "" || path.includes("\0") || Buffer.byteLength(path) > 4096) return undefined
  const absolute = path.startsWith("/") ? path : `${base}/${path}`
  let depth = 0
  for (const segment of absolute.split("/")) {
    if (segment === "" || segment === ".") continue
    depth += segment === ".." ? -1 : 1
    if (depth < 0) return undefined
  }
  return Path.posix.normalize(absolute).replace(/(.)\/+$/, "$1")
}
