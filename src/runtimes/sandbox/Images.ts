import { Context, Effect, Layer, Schema } from "effect"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { SandboxConfig } from "./SandboxConfig.ts"

/** An image name in the store: what `image` on create and `rbs images import --name` take. */
export const IMAGE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/

export class UnknownImage extends Schema.TaggedError<UnknownImage>()("UnknownImage", {
  name: Schema.String
}) {
  override get message() {
    return `no image "${this.name}" in this node's image store (rbs images list)`
  }
}

export class ImageError extends Schema.TaggedError<ImageError>()("ImageError", {
  detail: Schema.String
}) {
  override get message() {
    return this.detail
  }
}

/** An image of the node's store, as `rbs images list` shows it. */
export interface ImageInfo {
  readonly name: string
  /** The manifest's digest (`sha256:...`). */
  readonly digest: string
  /** The layers' size as stored (compressed). */
  readonly bytes: number
  readonly created: string | null
}

/** An image ready to run: its tree on disk (owned by root, never written) and its own environment. */
export interface ResolvedImage {
  readonly name: string
  readonly digest: string
  readonly rootfs: string
  readonly env: ReadonlyArray<string>
}

const REF_NAME = "org.opencontainers.image.ref.name"

const IndexJson = Schema.Struct({
  manifests: Schema.Array(
    Schema.Struct({
      digest: Schema.String,
      annotations: Schema.optional(Schema.Record(Schema.String, Schema.String))
    })
  )
})
const ManifestJson = Schema.Struct({
  config: Schema.Struct({ digest: Schema.String }),
  layers: Schema.Array(Schema.Struct({ size: Schema.Number }))
})
const ConfigJson = Schema.Struct({
  created: Schema.optional(Schema.String),
  config: Schema.optional(Schema.Struct({ Env: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))) }))
})
const BundleJson = Schema.Struct({
  process: Schema.optional(Schema.Struct({ env: Schema.optional(Schema.Array(Schema.String)) }))
})

const readJson = <S extends Schema.Top>(schema: S, path: string) =>
  Fs.readFile(path, "utf8").then((text) =>
    Schema.decodeUnknownSync(schema as unknown as Schema.Codec<S["Type"], unknown>)(JSON.parse(text))
  )

const blobPath = (layout: string, digest: string) => Path.join(layout, "blobs", ...digest.split(":"))

/** Runs a program, failing with its stderr. */
export const run = (file: string, args: ReadonlyArray<string>) =>
  new Promise<string>((resolve, reject) => {
    ChildProcess.execFile(file, [...args], { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error !== null) reject(new Error(`${Path.basename(file)}: ${(stderr || error.message).trim()}`))
      else resolve(stdout)
    })
  })

/**
 * The node's image store (`SANDBOX_IMAGES_DIR`): an OCI image layout
 * (`oci/`, images named by their `ref.name`), and each image unpacked once
 * by `umoci` (`unpacked/<digest>/rootfs`), which every sandbox of it mounts
 * read-only as the lower layer of its own overlay. No registry is ever
 * reached: images come from the set-up's build (`debian`, from Debian's
 * packages) or from `rbs images import` (an OCI layout or a docker-archive).
 */
export class Images extends Context.Service<
  Images,
  {
    readonly list: Effect.Effect<ReadonlyArray<ImageInfo>>
    readonly resolve: (name: string) => Effect.Effect<ResolvedImage, UnknownImage | ImageError>
    /** An image of another OCI layout on this node (an account's), unpacked beside the store's by its digest. */
    readonly resolveLayout: (image: {
      readonly name: string
      readonly dir: string
      readonly ref: string
    }) => Effect.Effect<ResolvedImage, UnknownImage | ImageError>
    readonly exists: (name: string) => Effect.Effect<boolean>
  }
>()("rbs/sandbox/Images") {
  static readonly layer = Layer.effect(
    Images,
    Effect.gen(function* () {
      const config = yield* SandboxConfig
      return Images.of(makeImages(config.imagesDir))
    })
  )
}

export const makeImages = (imagesDir: string) => {
  const layout = Path.join(imagesDir, "oci")
  const unpackedDir = Path.join(imagesDir, "unpacked")
  const unpacking = new Map<string, Promise<string>>()

  const manifests = async (of: string = layout) => {
    if (!FsSync.existsSync(Path.join(of, "index.json"))) return []
    const index = await readJson(IndexJson, Path.join(of, "index.json"))
    return index.manifests.flatMap((entry) => {
      const name = entry.annotations?.[REF_NAME]
      return name === undefined ? [] : [{ name, digest: entry.digest }]
    })
  }

  const list = Effect.promise(async () => {
    const found: Array<ImageInfo> = []
    for (const { name, digest } of await manifests()) {
      const manifest = await readJson(ManifestJson, blobPath(layout, digest))
      const imageConfig = await readJson(ConfigJson, blobPath(layout, manifest.config.digest)).catch(
        () => undefined
      )
      found.push({
        name,
        digest,
        bytes: manifest.layers.reduce((sum, layer) => sum + layer.size, 0),
        created: imageConfig?.created ?? null
      })
    }
    return found.sort((a, b) => a.name.localeCompare(b.name))
  }).pipe(Effect.orDie)

  /** Unpacks an image once (concurrent asks share the one unpack), into a dir renamed into place. */
  const unpack = (source: string, digest: string) => {
    const target = Path.join(unpackedDir, digest.replace(":", "-"))
    let pending = unpacking.get(target)
    if (pending === undefined) {
      pending = (async () => {
        if (FsSync.existsSync(Path.join(target, "rootfs"))) return target
        await Fs.mkdir(unpackedDir, { recursive: true })
        const temporary = `${target}.tmp-${Crypto.randomBytes(4).toString("hex")}`
        try {
          await run("umoci", ["unpack", "--image", source, temporary])
          await Fs.rename(temporary, target)
        } finally {
          await Fs.rm(temporary, { recursive: true, force: true })
        }
        return target
      })().finally(() => unpacking.delete(target))
      unpacking.set(target, pending)
    }
    return pending
  }

  const resolveIn = (name: string, of: string, ref: string) =>
    Effect.gen(function* () {
      const found = (yield* Effect.promise(() => manifests(of))).find((entry) => entry.name === ref)
      if (found === undefined) return yield* new UnknownImage({ name })
      const dir = yield* Effect.tryPromise({
        try: () => unpack(`${of}:${ref}`, found.digest),
        catch: (cause) => new ImageError({ detail: `cannot unpack ${name}: ${String(cause)}` })
      })
      const bundle = yield* Effect.promise(() =>
        readJson(BundleJson, Path.join(dir, "config.json")).catch(() => undefined)
      )
      return {
        name,
        digest: found.digest,
        rootfs: Path.join(dir, "rootfs"),
        env: bundle?.process?.env ?? []
      } satisfies ResolvedImage
    })

  const resolve = (name: string) =>
    IMAGE_NAME.test(name) ? resolveIn(name, layout, name) : Effect.fail(new UnknownImage({ name }))

  const resolveLayout = (image: { readonly name: string; readonly dir: string; readonly ref: string }) =>
    resolveIn(image.name, image.dir, image.ref)

  const exists = (name: string) =>
    Effect.promise(async () => (await manifests()).some((entry) => entry.name === name))

  return { list, resolve, resolveLayout, exists }
}

/**
 * `rbs images import`: an OCI layout (a directory, with `:<tag>` to pick one
 * of its images) or a docker-archive tarball (`docker save`), copied into the
 * store with skopeo under `name`, and unpacked. Local files only: signature
 * policy does not apply to them (`--insecure-policy`).
 */
export const importImage = async (imagesDir: string, source: string, name: string) => {
  if (!IMAGE_NAME.test(name)) throw new Error(`an image name is letters, digits, '.', '_' and '-': ${name}`)
  const [path, tag] = source.split(/:(?=[^/]*$)/)
  const stat = await Fs.stat(path!).catch(() => undefined)
  if (stat === undefined) throw new Error(`no such file or directory: ${path}`)
  const from = stat.isDirectory()
    ? `oci:${path}${tag === undefined ? "" : `:${tag}`}`
    : `docker-archive:${source}`
  const layout = Path.join(imagesDir, "oci")
  await Fs.mkdir(imagesDir, { recursive: true })
  await run("skopeo", ["--insecure-policy", "copy", "--quiet", from, `oci:${layout}:${name}`])
  const images = makeImages(imagesDir)
  return Effect.runPromise(images.resolve(name))
}
