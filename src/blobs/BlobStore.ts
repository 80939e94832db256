import { NodeStream } from "@effect/platform-node"
import { Context, Effect, Layer, Option, Stream } from "effect"
import { createReadStream } from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { ServiceConfig } from "../Config.ts"

/** A byte range of a blob, both ends included (an HTTP `Range`). */
export interface ByteRange {
  readonly start: number
  readonly end: number
}

/** Keys are paths of lowercase names: `recordings/sess_<uuid>.webm`. */
const KEY = /^[a-z0-9_-]+(\/[a-z0-9_.-]+)*$/

/**
 * Where what outlives a node's disk lives: session recordings now, snapshots
 * and job results later. `BLOB_STORE` is a directory (default
 * `DATA_DIR/blobs`); on several nodes, give them one shared directory, or each
 * node serves the blobs it holds through the node hop.
 */
export class BlobStore extends Context.Service<
  BlobStore,
  {
    /** Moves `file` (on this machine) into the store under `key`; its size. */
    readonly putFile: (key: string, file: string) => Effect.Effect<{ readonly bytes: number }>
    readonly stat: (key: string) => Effect.Effect<Option.Option<{ readonly bytes: number }>>
    readonly read: (key: string, range?: ByteRange) => Stream.Stream<Uint8Array>
    readonly remove: (key: string) => Effect.Effect<void>
  }
>()("rbs/blobs/BlobStore") {
  static readonly layer = Layer.effect(
    BlobStore,
    Effect.gen(function* () {
      const root = (yield* ServiceConfig).blobStore
      yield* Effect.promise(() => Fs.mkdir(root, { recursive: true }))
      const pathOf = (key: string) => {
        if (!KEY.test(key) || key.includes("..")) throw new Error(`not a blob key: ${key}`)
        return Path.join(root, key)
      }

      const putFile = (key: string, file: string) =>
        Effect.promise(async () => {
          const target = pathOf(key)
          await Fs.mkdir(Path.dirname(target), { recursive: true })
          // Written beside the target and renamed over it: a reader never sees half a blob.
          const partial = `${target}.partial`
          await Fs.copyFile(file, partial)
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

      return BlobStore.of({ putFile, stat, read, remove })
    })
  )
}
