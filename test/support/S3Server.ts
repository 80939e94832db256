// s3rver on loopback (an S3-compatible server, a dev dependency) for the blob store tests.
import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
// @ts-expect-error s3rver ships no types: a local S3-compatible server for the tests only.
import S3rver from "s3rver"

/** One bucket (`rbs-blobs`), its objects in a temp dir; its endpoint URL. Closed with the scope. */
export const serve = Effect.gen(function* () {
  const dir = yield* Effect.acquireRelease(
    Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-s3-"))),
    (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
  )
  const server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    silent: true,
    directory: dir,
    configureBuckets: [{ name: "rbs-blobs" }]
  })
  const { port } = yield* Effect.acquireRelease(
    Effect.promise(() => server.run() as Promise<{ port: number }>),
    () => Effect.promise(() => server.close())
  )
  return `http://127.0.0.1:${port}`
})
