import { Effect, Schema } from "effect"
import * as ChildProcess from "node:child_process"
import * as Dns from "node:dns/promises"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Path from "node:path"
import * as Stream from "node:stream"
import * as Zlib from "node:zlib"
import type { ImageReference } from "./ImageReference.ts"
import { fetchImage, PullFailed, type RegistryGuard } from "./RegistryClient.ts"

export { PullFailed, type RegistryGuard } from "./RegistryClient.ts"

/** Why a registry is not reached, for the log: never told the caller (no probe of what resolves where). */
export type RegistryProblem =
  | { readonly _tag: "Unresolvable" }
  | { readonly _tag: "Refused"; readonly address: string; readonly reason: string }

/**
 * The registry's addresses, each checked by the SSRF guard as a webhook's are, and whether it is
 * spoken to over plain http: only when every address is in `REGISTRY_ALLOW_CIDRS` (a registry on
 * the operator's own network, or a test's).
 */
export const checkRegistry = (reference: ImageReference, guard: RegistryGuard) =>
  Effect.gen(function* () {
    const addresses = Net.isIP(reference.host)
      ? [reference.host]
      : yield* Effect.tryPromise({
          try: () => Dns.lookup(reference.host, { all: true, verbatim: true }),
          catch: (): RegistryProblem => ({ _tag: "Unresolvable" })
        }).pipe(Effect.map((found) => found.map((each) => each.address)))
    if (addresses.length === 0) return yield* Effect.fail<RegistryProblem>({ _tag: "Unresolvable" })
    for (const address of addresses) {
      const reason = guard.policy.refusal(address, reference.port)
      if (reason !== undefined)
        return yield* Effect.fail<RegistryProblem>({ _tag: "Refused", address, reason })
    }
    return { insecure: addresses.every(guard.allowed) }
  })

/**
 * Where skopeo and tar are found: Debian's places, which the set-up installs them in. Fixed, not
 * the service's own PATH, so a library host's environment changes nothing of a pull.
 */
const PROGRAMS_PATH = "/usr/local/bin:/usr/bin:/bin"

/** A program run to its end; its stderr's last words on failure. Interrupting it kills it. */
const run = (
  file: string,
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  onSpawn?: (child: ChildProcess.ChildProcess) => void
) =>
  Effect.callback<string, { readonly stderr: string; readonly code: number | null }>((resume) => {
    const child = ChildProcess.spawn(file, [...args], { env, stdio: ["ignore", "pipe", "pipe"] })
    const out: Array<Buffer> = []
    let err = ""
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk))
    child.stderr.on("data", (chunk: Buffer) => {
      if (err.length < 65536) err += chunk.toString("utf8")
    })
    child.on("error", (error) => resume(Effect.fail({ stderr: error.message, code: null })))
    child.on("close", (code) =>
      resume(
        code === 0 ? Effect.succeed(Buffer.concat(out).toString("utf8")) : Effect.fail({ stderr: err, code })
      )
    )
    onSpawn?.(child)
    return Effect.sync(() => child.kill("SIGKILL"))
  })

export interface Pulled {
  /** The registry's digest of the manifest pulled (the platform's, from an index). */
  readonly digest: string
  /** The tar of the OCI layout (`image` its one ref), ready for the blob store. */
  readonly archive: string
  readonly bytes: number
}

/** What skopeo said, made short, without anything of the credentials. */
const tidy = (stderr: string, secrets: ReadonlyArray<string>) => {
  const line =
    stderr
      .trim()
      .split("\n")
      .filter((each) => each.trim() !== "")
      .pop() ?? "skopeo failed"
  let text = (/msg="(.*)"\s*$/.exec(line)?.[1] ?? line).replaceAll('\\"', '"')
  for (const secret of secrets) if (secret.length > 0) text = text.replaceAll(secret, "***")
  return text.slice(0, 500)
}

const failureOf = (stderr: string, secrets: ReadonlyArray<string>) => {
  const detail = tidy(stderr, secrets)
  return new PullFailed({
    code: /unauthorized|authentication required|invalid username\/password|denied|401/i.test(detail)
      ? "registry_unauthorized"
      : "image_pull_failed",
    detail: `The registry refused the pull: ${detail}`
  })
}

/**
 * Pulls `reference` into `dir` (the pull's own, removed by the caller): fetched by the service's
 * own registry client (`RegistryClient`, every connection checked by the SSRF guard), its manifest
 * read first and refused past `maxBytes` (its config and layers as stored), each blob pinned to
 * that manifest's digests and the fetch stopped as soon as it passes `maxBytes`; then converted
 * locally by skopeo (`dir:` to `oci:`, no network: Docker's media types become OCI's for umoci),
 * its layers counted unpacked, and tarred for the blob store.
 */
export const pull = (options: {
  readonly reference: ImageReference
  readonly credentials: { readonly username: string; readonly password: string } | undefined
  readonly guard: RegistryGuard
  readonly insecure: boolean
  readonly dir: string
  readonly maxBytes: number
  /** What its layers may unpack to (`IMAGE_MAX_UNPACKED_MB`): a layer that inflates past it is refused. */
  readonly maxUnpackedBytes: number
  readonly skopeo?: string | undefined
}) =>
  Effect.gen(function* () {
    const { reference, credentials, dir, maxBytes } = options
    const skopeo = options.skopeo ?? "skopeo"
    const secrets = credentials === undefined ? [] : [credentials.password]
    const tmp = Path.join(dir, "tmp")
    const fetched = Path.join(dir, "fetched")
    const layout = Path.join(dir, "layout")
    yield* Effect.promise(() => Fs.mkdir(tmp, { recursive: true, mode: 0o700 }))
    const { digest } = yield* fetchImage({
      reference,
      credentials,
      guard: options.guard,
      insecure: options.insecure,
      dir: fetched,
      maxBytes
    })
    // Nothing of the service's environment (its secrets key, its database URL) reaches skopeo, and
    // no proxy: it reads and writes this pull's files alone.
    const env = { PATH: PROGRAMS_PATH, TMPDIR: tmp, HOME: dir }
    yield* run(
      skopeo,
      ["--insecure-policy", "copy", "--quiet", `dir:${fetched}`, `oci:${layout}:image`],
      env
    ).pipe(Effect.mapError((failed) => failureOf(failed.stderr, secrets)))
    yield* Effect.promise(() => Fs.rm(fetched, { recursive: true, force: true }))
    yield* checkUnpacked(layout, options.maxUnpackedBytes)
    const archive = Path.join(dir, "image.tar")
    yield* run("tar", ["-C", layout, "-cf", archive, "."], env).pipe(
      Effect.mapError(
        (failed) => new PullFailed({ code: "image_pull_failed", detail: `tar: ${failed.stderr.trim()}` })
      )
    )
    const bytes = yield* Effect.promise(() => Fs.stat(archive).then((stat) => stat.size))
    if (bytes > maxBytes + 1024 * 1024)
      return yield* new PullFailed({
        code: "image_too_large",
        detail: `The image is ${Math.ceil(bytes / 2 ** 20)} MB or more, past this service's IMAGE_MAX_MB (${Math.floor(maxBytes / 2 ** 20)} MB).`
      })
    return { digest, archive, bytes } satisfies Pulled
  })

/** The archive a pull made, unpacked into `dir` (made here, absent before): an OCI layout, `image` its ref. */
export const unpackArchive = (archive: string, dir: string) =>
  run("tar", ["--no-same-owner", "-C", dir, "-xf", archive], {
    PATH: PROGRAMS_PATH
  }).pipe(
    Effect.mapError((failed) => new Error(`cannot unpack the image's archive: ${failed.stderr.trim()}`))
  )

const LayoutIndex = Schema.Struct({ manifests: Schema.Array(Schema.Struct({ digest: Schema.String })) })
const LayoutManifest = Schema.Struct({
  layers: Schema.Array(Schema.Struct({ mediaType: Schema.String, digest: Schema.String }))
})

/** How a layer of `mediaType` is read back to its tar stream; undefined for one no unpacker takes. */
const inflater = (mediaType: string): (() => Stream.Transform) | null | undefined => {
  if (/gzip$/.test(mediaType)) return () => Zlib.createGunzip()
  if (/zstd$/.test(mediaType)) return () => Zlib.createZstdDecompress()
  if (/tar$/.test(mediaType)) return null
  return undefined
}

/**
 * Reads each layer of the pulled layout back to its tar stream and counts it: past `maxBytes` in
 * all (a layer of zeros compresses a thousandfold), the pull fails `image_too_large` before the
 * image is kept, so no node ever unpacks it. The count stops as soon as it is past.
 */
const checkUnpacked = (layout: string, maxBytes: number) =>
  Effect.gen(function* () {
    const readJson = <S extends Schema.Top>(schema: S, path: string) =>
      Effect.tryPromise({
        try: async () =>
          Schema.decodeUnknownSync(schema as unknown as Schema.Codec<S["Type"], unknown>)(
            JSON.parse(await Fs.readFile(path, "utf8"))
          ),
        catch: () =>
          new PullFailed({
            code: "image_pull_failed",
            detail: "The pulled image's layout is not one we read."
          })
      })
    const blob = (digest: string) => Path.join(layout, "blobs", ...digest.split(":"))
    const index = yield* readJson(LayoutIndex, Path.join(layout, "index.json"))
    let total = 0
    for (const entry of index.manifests) {
      const manifest = yield* readJson(LayoutManifest, blob(entry.digest))
      for (const layer of manifest.layers) {
        const inflate = inflater(layer.mediaType)
        if (inflate === undefined)
          return yield* new PullFailed({
            code: "image_pull_failed",
            detail: `A layer of the image is ${layer.mediaType.slice(0, 100)}, which is not unpacked here.`
          })
        const counted = yield* Effect.tryPromise({
          try: () =>
            new Promise<number>((resolve, reject) => {
              let bytes = 0
              const source = FsSync.createReadStream(blob(layer.digest))
              const tar = inflate === null ? source : source.pipe(inflate())
              source.on("error", reject)
              tar.on("error", reject)
              tar.on("data", (chunk: Buffer) => {
                bytes += chunk.length
                if (total + bytes > maxBytes) {
                  source.destroy()
                  tar.destroy()
                  resolve(bytes)
                }
              })
              tar.on("end", () => resolve(bytes))
            }),
          catch: () =>
            new PullFailed({ code: "image_pull_failed", detail: "A layer of the image does not unpack." })
        })
        total += counted
        if (total > maxBytes)
          return yield* new PullFailed({
            code: "image_too_large",
            detail: `The image unpacks to more than ${Math.floor(maxBytes / 2 ** 20)} MB, past this service's IMAGE_MAX_UNPACKED_MB.`
          })
      }
    }
    return total
  })
