import * as NodeStream from "@effect/platform-node/NodeStream"
import { Context, Effect, Layer, Option, Redacted, Stream } from "effect"
import { createReadStream } from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import type { Readable } from "node:stream"
import { type BlobStoreConfig, BlobsConfig } from "../config/Config.ts"
import * as DataDir from "../files/DataDir.ts"

/** A byte range of a blob, both ends included (an HTTP `Range`). */
export interface ByteRange {
  readonly start: number
  readonly end: number
}

/** Keys are paths of lowercase names: `recordings/sess_<uuid>.webm`. */
const KEY = /^[a-z0-9_-]+(\/[a-z0-9_.-]+)*$/

/** The store's four operations, whatever holds the bytes. */
export interface BlobStoreShape {
  /** Moves `file` (on this machine) into the store under `key`; its size. */
  readonly putFile: (key: string, file: string) => Effect.Effect<{ readonly bytes: number }>
  readonly stat: (key: string) => Effect.Effect<Option.Option<{ readonly bytes: number }>>
  readonly read: (key: string, range?: ByteRange) => Stream.Stream<Uint8Array>
  readonly remove: (key: string) => Effect.Effect<void>
  /** Copies the blob `key` into `file` (on this machine), written whole or not at all. */
  readonly getFile: (key: string, file: string) => Effect.Effect<void>
}

/** Writes `body` to `file` through a temp file beside it, renamed over it once whole. */
const writeWhole = async (file: string, body: Readable) => {
  const partial = `${file}.partial`
  try {
    await Fs.writeFile(partial, body, { mode: DataDir.PRIVATE_FILE })
    await Fs.rename(partial, file)
  } finally {
    await Fs.rm(partial, { force: true })
  }
}

const checked = (key: string) => {
  if (!KEY.test(key) || key.includes("..")) throw new Error(`not a blob key: ${key}`)
  return key
}

/**
 * Where what outlives a node's disk lives: session recordings now, snapshots
 * and job results later. `BLOB_STORE` is a directory (default
 * `DATA_DIR/blobs`), or `s3://bucket/prefix` on an S3-compatible store, which
 * every node of a cluster reads and writes alike. A store's failure (the
 * disk, the bucket away) is a defect of the request that met it.
 */
export class BlobStore extends Context.Service<BlobStore, BlobStoreShape>()("rbs/blobs/BlobStore") {
  static readonly layer = Layer.effect(
    BlobStore,
    Effect.gen(function* () {
      const store = (yield* BlobsConfig).blobStore
      return store._tag === "Directory" ? yield* directory(store.path) : yield* s3(store)
    })
  )
}

/** Half-written blobs older than this are what a stopped writer left: removed when a store opens. */
export const PARTIAL_MAX_AGE_MS = 3_600_000

/** Removes `*.partial` files under `dir` last written before `before` (a writer still at it is younger). */
const sweepPartials = async (dir: string, before: number): Promise<void> => {
  for (const entry of await Fs.readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const path = Path.join(dir, entry.name)
    if (entry.isDirectory()) await sweepPartials(path, before)
    else if (entry.name.endsWith(".partial")) {
      const found = await Fs.stat(path).catch(() => undefined)
      if (found !== undefined && found.mtimeMs < before) await Fs.rm(path, { force: true })
    }
  }
}

/** A directory on this machine: written beside the target and renamed over it. */
export const directory = (root: string) =>
  Effect.gen(function* () {
    // Tenants' blobs: the service's alone, wherever the store is (a dir of its own, or in the data dir).
    yield* Effect.promise(async () => {
      await DataDir.makePrivate(root)
      await Fs.chmod(root, DataDir.PRIVATE_DIR)
    })
    yield* Effect.promise(() => sweepPartials(root, Date.now() - PARTIAL_MAX_AGE_MS))
    const pathOf = (key: string) => Path.join(root, checked(key))

    const putFile = (key: string, file: string) =>
      Effect.promise(async () => {
        const target = pathOf(key)
        await DataDir.makePrivate(Path.dirname(target), root)
        // Written beside the target and renamed over it: a reader never sees half a blob. A copy
        // takes its source's mode: made the service's alone before it is in place.
        const partial = `${target}.partial`
        await Fs.copyFile(file, partial)
        await Fs.chmod(partial, DataDir.PRIVATE_FILE)
        await Fs.rename(partial, target)
        await Fs.rm(file, { force: true })
        return { bytes: (await Fs.stat(target)).size }
      })

    const stat = (key: string) =>
      Effect.promise(() =>
        Fs.stat(pathOf(key)).then(
          (found) => Option.some({ bytes: found.size }),
          () => Option.none()
        )
      )

    // A blob that vanishes while it is read (deleted meanwhile) is the store's fault, not the reader's.
    const read = (key: string, range?: ByteRange) =>
      NodeStream.fromReadable({ evaluate: () => createReadStream(pathOf(key), range ?? {}) }).pipe(
        Stream.orDie
      )

    const remove = (key: string) => Effect.promise(() => Fs.rm(pathOf(key), { force: true }))

    const getFile = (key: string, file: string) =>
      Effect.promise(async () => {
        try {
          await Fs.copyFile(pathOf(key), `${file}.partial`)
          await Fs.rename(`${file}.partial`, file)
        } finally {
          await Fs.rm(`${file}.partial`, { force: true })
        }
      })

    return BlobStore.of({ putFile, stat, read, remove, getFile })
  })

/**
 * A bucket of an S3-compatible store (`@aws-sdk/client-s3`, loaded only for
 * one: a node on a directory starts without it). An object is whole once
 * `PutObject` returns: a reader never sees half a blob.
 */
export const s3 = (store: Extract<BlobStoreConfig, { readonly _tag: "S3" }>) =>
  Effect.map(
    Effect.promise(() => import("@aws-sdk/client-s3")),
    (S3) => bucket(S3, store)
  )

const bucket = (
  S3: typeof import("@aws-sdk/client-s3"),
  store: Extract<BlobStoreConfig, { readonly _tag: "S3" }>
) => {
  const client = new S3.S3Client({
    region: store.region,
    // Checksums only where S3 requires them: a streamed upload otherwise goes `aws-chunked` with a
    // trailing checksum, which S3-compatible stores (MinIO's older releases, s3rver, others) store as is.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    ...(store.endpoint === undefined ? {} : { endpoint: store.endpoint, forcePathStyle: true }),
    ...(store.credentials === undefined
      ? {}
      : {
          credentials: {
            accessKeyId: store.credentials.accessKeyId,
            secretAccessKey: Redacted.value(store.credentials.secretAccessKey)
          }
        })
  })
  const Bucket = store.bucket
  const keyOf = (key: string) => `${store.prefix}${checked(key)}`
  const isMissing = (error: unknown) =>
    error instanceof S3.NotFound ||
    error instanceof S3.NoSuchKey ||
    (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404

  const putFile = (key: string, file: string) =>
    Effect.promise(async () => {
      const { size } = await Fs.stat(file)
      await client.send(
        new S3.PutObjectCommand({
          Bucket,
          Key: keyOf(key),
          Body: createReadStream(file),
          ContentLength: size
        })
      )
      await Fs.rm(file, { force: true })
      return { bytes: size }
    })

  const stat = (key: string) =>
    Effect.promise(() =>
      client.send(new S3.HeadObjectCommand({ Bucket, Key: keyOf(key) })).then(
        (head) => Option.some({ bytes: head.ContentLength ?? 0 }),
        (error) => {
          if (isMissing(error)) return Option.none()
          throw error
        }
      )
    )

  const read = (key: string, range?: ByteRange) =>
    Stream.unwrap(
      Effect.promise(() =>
        client.send(
          new S3.GetObjectCommand({
            Bucket,
            Key: keyOf(key),
            ...(range === undefined ? {} : { Range: `bytes=${range.start}-${range.end}` })
          })
        )
      ).pipe(
        Effect.map((object) =>
          NodeStream.fromReadable({ evaluate: () => object.Body as Readable }).pipe(Stream.orDie)
        )
      )
    )

  const remove = (key: string) =>
    Effect.promise(() => client.send(new S3.DeleteObjectCommand({ Bucket, Key: keyOf(key) }))).pipe(
      Effect.asVoid
    )

  const getFile = (key: string, file: string) =>
    Effect.promise(async () => {
      const object = await client.send(new S3.GetObjectCommand({ Bucket, Key: keyOf(key) }))
      await writeWhole(file, object.Body as Readable)
    })

  return BlobStore.of({ putFile, stat, read, remove, getFile })
}
