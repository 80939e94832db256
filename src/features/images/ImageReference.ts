import { IMAGE_NAME } from "../../kernel/Image.ts"

/** A registry reference, parsed: what a pull is given, always with its registry spelled out. */
export interface ImageReference {
  /** `host[:port]` as the registry is reached (and as an auth file names it). */
  readonly registry: string
  /** The host alone, IPv6 without brackets: what the SSRF guard checks. */
  readonly host: string
  readonly port: number
  readonly repository: string
  /** `:tag` or `@sha256:...`. */
  readonly pin: string
  /** `docker://registry/repository:tag`: the normalized form, what the image shows. */
  readonly normalized: string
}

// The distribution spec's grammar (docker/distribution's reference package), strict: a repository's
// parts lowercase, a tag of word characters, a digest sha256. Nothing else is ever pulled.
const HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$/
const PART = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/
const DIGEST = /^sha256:[a-f0-9]{64}$/

/** Transports skopeo knows besides `docker://`: each reads or writes this host's files or daemons. */
const LOCAL_TRANSPORTS =
  /^(?:oci|oci-archive|dir|docker-archive|docker-daemon|containers-storage|ostree|sif|tarball|atomic):/i

/**
 * A reference a pull may take, or why not: `docker://` (or no transport) to a registry,
 * `host[:port]/repository[:tag|@digest]`, Docker Hub's when the first part is no host (no dot, no
 * port, not `localhost`). A local transport (`oci:`, `dir:`, `docker-archive:`, ...) would make the
 * service read its own host's files for the caller: refused, as any other transport is.
 */
export const parse = (raw: string): ImageReference | { readonly refused: string } => {
  if (raw.length === 0 || raw.length > 512) return { refused: "it is empty or longer than 512 characters" }
  if (/[\s\u0000-\u001f\u007f]/.test(raw)) return { refused: "it contains spaces or control characters" }
  let rest: string
  if (raw.startsWith("docker://")) rest = raw.slice("docker://".length)
  else if (LOCAL_TRANSPORTS.test(raw))
    return {
      refused: `the ${raw.slice(0, raw.indexOf(":"))}: transport reads this host's files; only docker:// references to a registry are pulled`
    }
  else if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(raw))
    return { refused: "only the docker:// transport is pulled" }
  else rest = raw
  let pin = ":latest"
  const at = rest.indexOf("@")
  if (at !== -1) {
    const digest = rest.slice(at + 1)
    if (!DIGEST.test(digest)) return { refused: "a digest is sha256: and 64 hex digits" }
    pin = `@${digest}`
    rest = rest.slice(0, at)
  }
  const parts = rest.split("/")
  const first = parts[0] ?? ""
  const hasHost = parts.length > 1 && (first.includes(".") || first.includes(":") || first === "localhost")
  const registry = hasHost ? first : "docker.io"
  const path = hasHost ? parts.slice(1) : parts
  const last = path[path.length - 1] ?? ""
  const colon = last.lastIndexOf(":")
  if (colon !== -1) {
    const tag = last.slice(colon + 1)
    if (at !== -1 || !TAG.test(tag)) return { refused: "a tag is letters, digits, '_', '.' and '-'" }
    pin = `:${tag}`
    path[path.length - 1] = last.slice(0, colon)
  }
  const hostMatch = HOST.exec(registry)
  if (hostMatch === null) return { refused: "its registry is not a host name or address" }
  const port = hostMatch[1] === undefined ? 443 : Number(hostMatch[1])
  if (port < 1 || port > 65535) return { refused: "its registry's port is out of range" }
  if (path.length === 0 || !path.every((part) => PART.test(part)))
    return { refused: "a repository is lowercase letters, digits and separators, parted by '/'" }
  const repository = !hasHost && path.length === 1 ? `library/${path[0]}` : path.join("/")
  if (`${registry}/${repository}`.length > 255) return { refused: "its name is longer than 255 characters" }
  const host = registry.replace(/:\d+$/, "").replace(/^\[(.*)\]$/, "$1")
  return {
    registry,
    host,
    port,
    repository,
    pin,
    normalized: `docker://${registry}/${repository}${pin}`
  }
}

/** The name an image takes when its create names none: the repository's last part, `-<tag>` unless `latest`. */
export const defaultName = (reference: ImageReference) => {
  const base = reference.repository.split("/").pop()!
  const tag = reference.pin.startsWith(":") ? reference.pin.slice(1) : "latest"
  const name = (tag === "latest" ? base : `${base}-${tag}`).slice(0, 128)
  return IMAGE_NAME.test(name) ? name : base.slice(0, 128)
}
