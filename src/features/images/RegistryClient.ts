/**
 * The service's own client of a registry's API (distribution v2), for a pull: the manifest (an
 * index's linux variant for this node's architecture) and then its config and layers, each streamed
 * to disk and checked against its digest. Every connection it makes, each redirect hop and a token
 * service included, goes to an address it resolved and checked with the SSRF guard first: nothing
 * else connects on the registry's behalf (skopeo, which did, sent a loopback destination past any
 * proxy). What it fetched is written in skopeo's `dir:` layout, for a local conversion to OCI.
 */
import { Effect, Schema } from "effect"
import * as Crypto from "node:crypto"
import * as Dns from "node:dns/promises"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import * as Https from "node:https"
import * as Net from "node:net"
import * as Path from "node:path"
import { ImagePullFailure } from "../../kernel/Image.ts"
import type { AddressPolicy } from "../../platform/net/AddressPolicy.ts"
import { normalizeHost } from "../../platform/net/AddressPolicy.ts"
import type { ImageReference } from "./ImageReference.ts"

/** Why a pull stopped: its `error` on the image. */
export class PullFailed extends Schema.TaggedError<PullFailed>()("PullFailed", {
  code: ImagePullFailure,
  detail: Schema.String
}) {
  override get message() {
    return this.detail
  }
}

export interface RegistryGuard {
  readonly policy: AddressPolicy
  /** In `REGISTRY_ALLOW_CIDRS`: plain http (and no certificate check) is accepted there. */
  readonly allowed: (address: string) => boolean
}

/** A hop the guard refused: the pull fails naming it, and the log says so. */
class HopRefused extends Error {
  readonly host: string
  readonly reason: string
  constructor(host: string, reason: string) {
    super(`The registry sent the pull to an address this service may not reach (${host}: ${reason}).`)
    this.host = host
    this.reason = reason
  }
}

const failed = (detail: string) => new PullFailed({ code: "image_pull_failed", detail })
const unauthorized = (detail: string) =>
  new PullFailed({ code: "registry_unauthorized", detail: `The registry refused the pull: ${detail}` })

export const MAX_REDIRECTS = 5
const MANIFEST_MAX_BYTES = 4 * 2 ** 20
const TOKEN_MAX_BYTES = 1 * 2 ** 20
const TIMEOUT_MS = 60_000
const REDIRECTS = new Set([301, 302, 303, 307, 308])

export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
export const OCI_INDEX = "application/vnd.oci.image.index.v1+json"
export const DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
export const DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
const ACCEPT = [OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST].join(", ")
const MANIFEST_LIST = new Set([OCI_INDEX, DOCKER_LIST])
const DIGEST = /^sha256:[a-f0-9]{64}$/

const Descriptor = Schema.Struct({ digest: Schema.String, size: Schema.Number })
const ManifestJson = Schema.Struct({
  schemaVersion: Schema.optional(Schema.Number),
  mediaType: Schema.optional(Schema.String),
  config: Schema.optional(Descriptor),
  layers: Schema.optional(Schema.Array(Descriptor)),
  manifests: Schema.optional(
    Schema.Array(
      Schema.Struct({
        digest: Schema.String,
        platform: Schema.optional(Schema.Struct({ os: Schema.String, architecture: Schema.String }))
      })
    )
  )
})
const decodeManifest = Schema.decodeUnknownSync(Schema.fromJsonString(ManifestJson))
const TokenJson = Schema.Struct({
  token: Schema.optional(Schema.String),
  access_token: Schema.optional(Schema.String)
})
const decodeToken = Schema.decodeUnknownSync(Schema.fromJsonString(TokenJson))

/** This node's architecture as OCI names it. */
const ARCH: Record<string, string> = {
  x64: "amd64",
  arm64: "arm64",
  arm: "arm",
  ppc64: "ppc64le",
  s390x: "s390x"
}

const sha256 = (bytes: Buffer) => `sha256:${Crypto.createHash("sha256").update(bytes).digest("hex")}`

/**
 * One request to `url`, no redirect followed: its host resolved (or the literal), every address
 * checked by the guard, the connection made to the first. Plain http only where every address is
 * in `REGISTRY_ALLOW_CIDRS`; there, too, a certificate is not checked.
 */
const connect = async (
  guard: RegistryGuard,
  url: URL,
  headers: Http.OutgoingHttpHeaders,
  signal: AbortSignal,
  timeoutMs = TIMEOUT_MS
): Promise<Http.IncomingMessage> => {
  const host = normalizeHost(url.hostname)
  const secure = url.protocol === "https:"
  if (!secure && url.protocol !== "http:") throw new HopRefused(host, "not http or https")
  const port = Number(url.port || (secure ? 443 : 80))
  const addresses = Net.isIP(host)
    ? [host]
    : await Dns.lookup(host, { all: true, verbatim: true }).then(
        (found) => found.map((each) => each.address),
        () => []
      )
  if (addresses.length === 0) throw new HopRefused(host, "unresolved")
  for (const address of addresses) {
    const reason = guard.policy.refusal(address, port)
    if (reason !== undefined) throw new HopRefused(host, reason)
  }
  const trusted = addresses.every(guard.allowed)
  if (!secure && !trusted) throw new HopRefused(host, "plain http")
  return new Promise((resolve, reject) => {
    const options: Https.RequestOptions = {
      host: addresses[0]!,
      port,
      method: "GET",
      path: `${url.pathname}${url.search}`,
      headers: { ...headers, host: url.host },
      signal,
      agent: false
    }
    const request = secure
      ? Https.request({
          ...options,
          ...(Net.isIP(host) ? {} : { servername: host }),
          rejectUnauthorized: !trusted
        })
      : Http.request(options)
    request.setTimeout(timeoutMs, () => request.destroy(new Error("timed out")))
    request.on("response", resolve)
    request.on("error", (error: NodeJS.ErrnoException) =>
      reject(
        signal.aborted
          ? error
          : failed(`The registry could not be reached (${host}: ${error.code ?? "failed"}).`)
      )
    )
    request.end()
  })
}

/** `url` with its redirects followed (at most `MAX_REDIRECTS`), each hop checked as the first. */
const follow = async (
  guard: RegistryGuard,
  start: URL,
  headers: Http.OutgoingHttpHeaders,
  signal: AbortSignal
): Promise<Http.IncomingMessage> => {
  let url = start
  let sent = headers
  for (let hop = 0; ; hop++) {
    const response = await connect(guard, url, sent, signal)
    if (!REDIRECTS.has(response.statusCode ?? 0)) return response
    response.resume()
    const location = response.headers.location
    if (location === undefined) throw failed("The registry sent a redirect without a location.")
    if (hop >= MAX_REDIRECTS)
      throw failed(`The registry redirected the pull more than ${MAX_REDIRECTS} times.`)
    let next: URL
    try {
      next = new URL(location, url)
    } catch {
      throw failed("The registry sent a redirect to no URL we read.")
    }
    // The registry's credentials go to the registry alone, never to where it sends us.
    if (next.host !== url.host || next.protocol !== url.protocol) {
      const { authorization: _dropped, ...rest } = sent
      sent = rest
    }
    url = next
  }
}

/** The body, whole, or a failure past `limit` bytes (the connection dropped then). */
const readCapped = (response: Http.IncomingMessage, limit: number, what: string) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let bytes = 0
    response.on("data", (chunk: Buffer) => {
      bytes += chunk.length
      if (bytes > limit) {
        response.destroy()
        reject(failed(`The registry's ${what} is larger than ${Math.floor(limit / 2 ** 20)} MiB.`))
      } else chunks.push(chunk)
    })
    response.on("error", () => reject(failed(`The registry's ${what} was cut off.`)))
    response.on("end", () => resolve(Buffer.concat(chunks)))
  })

/** `key="value", ...` of a `WWW-Authenticate` header, its scheme lowercased. */
const parseChallenge = (header: string | undefined) => {
  const text = (header ?? "").trim()
  const space = text.indexOf(" ")
  const scheme = (space === -1 ? text : text.slice(0, space)).toLowerCase()
  const params: Record<string, string> = {}
  for (const match of text.slice(space + 1).matchAll(/([A-Za-z_]+)\s*=\s*(?:"([^"]*)"|([^,\s]*))/g))
    params[match[1]!.toLowerCase()] = match[2] ?? match[3] ?? ""
  return { scheme, params }
}

export interface Fetched {
  /** The registry's digest of the manifest fetched (the platform's, from an index). */
  readonly digest: string
}

/**
 * Fetches `reference` into `dir` (made here) in skopeo's `dir:` layout: `manifest.json`, each blob
 * named by its hex digest, `version`. Past `maxBytes` (declared, or as received) it fails
 * `image_too_large` as soon as it is past.
 */
export const fetchImage = (options: {
  readonly reference: ImageReference
  readonly credentials: { readonly username: string; readonly password: string } | undefined
  readonly guard: RegistryGuard
  /** Every address of the registry in `REGISTRY_ALLOW_CIDRS`: https tried, then plain http. */
  readonly insecure: boolean
  readonly dir: string
  readonly maxBytes: number
}) =>
  Effect.tryPromise({
    try: (signal) => fetchAll(options, signal),
    catch: (error) => error
  }).pipe(
    Effect.catch((error) =>
      error instanceof PullFailed
        ? Effect.fail(error)
        : error instanceof HopRefused
          ? Effect.logInfo("image.registry_refused", { host: error.host, reason: error.reason }).pipe(
              Effect.andThen(Effect.fail(failed(error.message)))
            )
          : Effect.die(error)
    )
  )

const fetchAll = async (options: Parameters<typeof fetchImage>[0], signal: AbortSignal): Promise<Fetched> => {
  const { reference, credentials, guard, dir, maxBytes } = options
  const basic =
    credentials === undefined
      ? undefined
      : `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64")}`
  const authority = reference.registry === "docker.io" ? "registry-1.docker.io" : reference.registry
  let scheme = "https:"
  if (options.insecure) {
    // A registry of the operator's own network: https (its certificate unchecked) when it speaks it.
    const probe = await connect(guard, new URL(`https://${authority}/v2/`), {}, signal, 5_000).then(
      (response) => (response.resume(), true),
      (error) => {
        if (error instanceof HopRefused || signal.aborted) throw error
        return false
      }
    )
    if (!probe) scheme = "http:"
  }
  const base = `${scheme}//${authority}`
  let authorization: string | undefined

  const authorize = async (header: string | undefined): Promise<string> => {
    const { scheme: kind, params } = parseChallenge(header)
    if (kind === "basic") {
      if (basic === undefined) throw unauthorized("authentication required.")
      return basic
    }
    if (kind !== "bearer" || params.realm === undefined) throw unauthorized("authentication required.")
    let realm: URL
    try {
      realm = new URL(params.realm)
    } catch {
      throw failed("The registry's token service is no URL we read.")
    }
    if (params.service !== undefined) realm.searchParams.set("service", params.service)
    realm.searchParams.set("scope", params.scope ?? `repository:${reference.repository}:pull`)
    const response = await follow(guard, realm, basic === undefined ? {} : { authorization: basic }, signal)
    const status = response.statusCode ?? 0
    if (status === 401 || status === 403) {
      response.resume()
      throw unauthorized(
        basic === undefined ? "authentication required." : "the username and password were not accepted."
      )
    }
    if (status !== 200) {
      response.resume()
      throw failed(`The registry's token service answered ${status}.`)
    }
    const body = await readCapped(response, TOKEN_MAX_BYTES, "token")
    let token: string | undefined
    try {
      const parsed = decodeToken(body.toString("utf8"))
      token = parsed.token ?? parsed.access_token
    } catch {
      token = undefined
    }
    if (token === undefined || token === "" || /[\r\n]/.test(token))
      throw failed("The registry's token service sent no token.")
    return `Bearer ${token}`
  }

  /** A GET of the registry's API, authorized as its challenge asks (once), redirects followed. */
  const get = async (path: string, what: string, accept?: string) => {
    const url = new URL(`${base}${path}`)
    const headers = (): Http.OutgoingHttpHeaders => ({
      "user-agent": "rbs-image-pull",
      ...(accept === undefined ? {} : { accept }),
      ...(authorization === undefined ? {} : { authorization })
    })
    let response = await follow(guard, url, headers(), signal)
    if (response.statusCode === 401) {
      response.resume()
      const tried = authorization
      authorization = await authorize(response.headers["www-authenticate"])
      if (tried === authorization) throw unauthorized("the username and password were not accepted.")
      response = await follow(guard, url, headers(), signal)
    }
    const status = response.statusCode ?? 0
    if (status === 200) return response
    response.resume()
    if (status === 401)
      throw unauthorized(
        basic === undefined ? "authentication required." : "the username and password were not accepted."
      )
    if (status === 403) throw unauthorized(`access to the ${what} denied (403).`)
    if (status === 404) throw failed(`The registry refused the pull: ${what} unknown (404).`)
    throw failed(`The registry answered ${status} for the ${what}.`)
  }

  const manifestOf = async (ref: string) => {
    const response = await get(`/v2/${reference.repository}/manifests/${ref}`, "manifest", ACCEPT)
    const raw = await readCapped(response, MANIFEST_MAX_BYTES, "manifest")
    if (ref.startsWith("sha256:") && sha256(raw) !== ref)
      throw failed("The registry's manifest does not match its digest.")
    let manifest: typeof ManifestJson.Type
    try {
      manifest = decodeManifest(raw.toString("utf8"))
    } catch {
      throw failed("The registry's manifest is not one we read.")
    }
    const mediaType = manifest.mediaType ?? response.headers["content-type"]?.split(";")[0]?.trim() ?? ""
    return { raw, manifest, mediaType }
  }

  let { raw, manifest, mediaType } = await manifestOf(reference.pin.slice(1))
  if (manifest.manifests !== undefined || MANIFEST_LIST.has(mediaType)) {
    const arch = ARCH[process.arch] ?? process.arch
    const chosen = (manifest.manifests ?? []).find(
      (each) => each.platform?.os === "linux" && each.platform.architecture === arch
    )
    if (chosen === undefined) throw failed(`The image has no linux/${arch} variant.`)
    if (!DIGEST.test(chosen.digest)) throw failed("The registry's manifest is not one we read.")
    ;({ raw, manifest, mediaType } = await manifestOf(chosen.digest))
  }
  if (manifest.schemaVersion !== 2 || manifest.config === undefined || manifest.manifests !== undefined)
    throw failed("The registry's manifest is not one we read.")
  const blobs = [manifest.config, ...(manifest.layers ?? [])]
  if (!blobs.every((each) => DIGEST.test(each.digest) && Number.isSafeInteger(each.size) && each.size >= 0))
    throw failed("The registry's manifest is not one we read.")
  const tooLarge = (bytes: number) =>
    new PullFailed({
      code: "image_too_large",
      detail: `The image is ${Math.ceil(bytes / 2 ** 20)} MB or more, past this service's IMAGE_MAX_MB (${Math.floor(maxBytes / 2 ** 20)} MB).`
    })
  const declared = blobs.reduce((sum, each) => sum + each.size, 0)
  if (declared > maxBytes) throw tooLarge(declared)

  await Fs.mkdir(dir, { recursive: true, mode: 0o700 })
  let total = 0
  const seen = new Set<string>()
  for (const blob of blobs) {
    if (seen.has(blob.digest)) continue
    seen.add(blob.digest)
    const response = await get(`/v2/${reference.repository}/blobs/${blob.digest}`, "blob")
    const length = Number(response.headers["content-length"] ?? Number.NaN)
    if (Number.isFinite(length) && total + length > maxBytes) {
      response.destroy()
      throw tooLarge(total + length)
    }
    const file = Path.join(dir, blob.digest.slice("sha256:".length))
    const digest = await new Promise<string>((resolve, reject) => {
      const hash = Crypto.createHash("sha256")
      const out = FsSync.createWriteStream(file, { mode: 0o600 })
      const fail = (error: unknown) => {
        response.destroy()
        out.destroy()
        reject(error)
      }
      response.on("data", (chunk: Buffer) => {
        total += chunk.length
        if (total > maxBytes) return fail(tooLarge(total))
        hash.update(chunk)
        if (!out.write(chunk)) {
          response.pause()
          out.once("drain", () => response.resume())
        }
      })
      response.on("error", () => fail(failed("A blob of the image was cut off.")))
      out.on("error", fail)
      response.on("end", () => out.end(() => resolve(`sha256:${hash.digest("hex")}`)))
    })
    if (digest !== blob.digest)
      throw failed(`A blob of the image does not match its digest (${blob.digest}).`)
  }
  await Fs.writeFile(Path.join(dir, "manifest.json"), raw, { mode: 0o600 })
  await Fs.writeFile(Path.join(dir, "version"), "Directory Transport Version: 1.1\n")
  return { digest: sha256(raw) }
}
