import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted, Stream } from "effect"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Util from "node:util"
import * as S3Server from "../../support/S3Server.ts"
import { type BlobStoreShape, directory, s3 } from "../../../src/platform/blobs/BlobStore.ts"
import { makeServiceConfig } from "../../../src/platform/config/Config.ts"

const tempDir = Effect.acquireRelease(
  Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-blobs-"))),
  (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
)

const collect = (stream: Stream.Stream<Uint8Array>) =>
  Effect.map(Stream.runCollect(stream), (chunks) => Buffer.concat([...chunks]).toString("utf8"))

/** What every store does, whatever holds the bytes. */
const contract = (store: BlobStoreShape, scratch: string) =>
  Effect.gen(function* () {
    const file = Path.join(scratch, "upload.txt")
    yield* Effect.promise(() => Fs.writeFile(file, "0123456789abcdef"))
    assert.deepStrictEqual(yield* store.putFile("recordings/sess_1.webm", file), { bytes: 16 })
    const gone = yield* Effect.promise(() =>
      Fs.stat(file).then(
        () => false,
        () => true
      )
    )
    assert.isTrue(gone, "the file is moved into the store")

    assert.deepStrictEqual(yield* store.stat("recordings/sess_1.webm"), Option.some({ bytes: 16 }))
    assert.strictEqual(yield* collect(store.read("recordings/sess_1.webm")), "0123456789abcdef")
    assert.strictEqual(yield* collect(store.read("recordings/sess_1.webm", { start: 10, end: 12 })), "abc")

    // A second put under the same key replaces the blob whole.
    yield* Effect.promise(() => Fs.writeFile(file, "new"))
    assert.deepStrictEqual(yield* store.putFile("recordings/sess_1.webm", file), { bytes: 3 })
    assert.strictEqual(yield* collect(store.read("recordings/sess_1.webm")), "new")
    const copy = Path.join(scratch, "copy.txt")
    yield* store.getFile("recordings/sess_1.webm", copy)
    assert.strictEqual(
      yield* Effect.promise(() => Fs.readFile(copy, "utf8")),
      "new",
      "a copy to a local file"
    )

    assert.deepStrictEqual(yield* store.stat("recordings/none.webm"), Option.none())
    yield* store.remove("recordings/sess_1.webm")
    assert.deepStrictEqual(yield* store.stat("recordings/sess_1.webm"), Option.none())
    yield* store.remove("recordings/sess_1.webm")

    // A key is a path of lowercase names: nothing that could leave the store.
    for (const bad of ["../etc/passwd", "Recordings/x", "a//b", "/abs"]) {
      const refused = yield* Effect.exit(Effect.suspend(() => store.stat(bad)))
      assert.strictEqual(refused._tag, "Failure", bad)
    }
  })

describe("BlobStore", () => {
  it.live(
    "a directory store opening removes half-written blobs a stopped writer left, not one being written",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        yield* Effect.promise(async () => {
          await Fs.mkdir(Path.join(root, "jobs", "j1"), { recursive: true })
          await Fs.writeFile(Path.join(root, "jobs", "j1", "1.partial"), "stale")
          const old = new Date(Date.now() - 2 * 3_600_000)
          await Fs.utimes(Path.join(root, "jobs", "j1", "1.partial"), old, old)
          await Fs.writeFile(Path.join(root, "jobs", "j1", "2.partial"), "being written")
          await Fs.writeFile(Path.join(root, "jobs", "j1", "3"), "whole")
        })
        yield* directory(root)
        const left = yield* Effect.promise(() => Fs.readdir(Path.join(root, "jobs", "j1")))
        assert.deepStrictEqual(left.sort(), ["2.partial", "3"])
      }).pipe(Effect.scoped)
  )

  it.live("a directory keeps blobs: put, stat, read (a range too), replace, remove", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      yield* contract(yield* directory(Path.join(root, "blobs")), root)
    }).pipe(Effect.scoped)
  )

  it.live("an S3 bucket (s3rver on loopback) keeps them the same way, under the prefix", () =>
    Effect.gen(function* () {
      const endpoint = yield* S3Server.serve
      const scratch = yield* tempDir
      const config = makeServiceConfig({
        blobStore: "s3://rbs-blobs/node-blobs/",
        s3Endpoint: endpoint,
        s3AccessKeyId: "S3RVER",
        s3SecretAccessKey: "S3RVER"
      }).blobStore
      if (config._tag !== "S3") return assert.fail("an S3 store")
      assert.strictEqual(config.prefix, "node-blobs/")
      const store = yield* s3(config)
      yield* contract(store, scratch)

      // Under the prefix: another prefix in the same bucket sees nothing of it.
      yield* Effect.promise(() => Fs.writeFile(Path.join(scratch, "f"), "x"))
      yield* store.putFile("recordings/sess_2.webm", Path.join(scratch, "f"))
      const other = yield* s3({ ...config, prefix: "other/" })
      assert.deepStrictEqual(yield* other.stat("recordings/sess_2.webm"), Option.none())

      // Keys the store does not know: the request fails (a defect of the caller's), and the secret is
      // in no message.
      const wrong = yield* s3({
        ...config,
        credentials: { accessKeyId: "NOBODY", secretAccessKey: Redacted.make("not-the-secret") }
      })
      const refused = yield* Effect.exit(wrong.stat("recordings/sess_2.webm"))
      assert.strictEqual(refused._tag, "Failure")
      assert.notInclude(String(refused), "not-the-secret")
    }).pipe(Effect.scoped)
  )

  it("BLOB_STORE is a directory or s3://bucket/prefix, with both S3 keys or neither", () => {
    const base = { dataDir: "/srv/rbs" }
    assert.deepStrictEqual(makeServiceConfig(base).blobStore, { _tag: "Directory", path: "/srv/rbs/blobs" })
    const bucket = makeServiceConfig({ ...base, blobStore: "s3://my-bucket" }).blobStore
    assert.deepInclude(bucket, { _tag: "S3", bucket: "my-bucket", prefix: "", region: "us-east-1" })
    assert.throws(
      () => makeServiceConfig({ ...base, blobStore: "gs://b/p" }),
      /BLOB_STORE must be a directory or s3/
    )
    assert.throws(() => makeServiceConfig({ ...base, blobStore: "s3://No_Such/p" }), /not an S3 bucket name/)
    assert.throws(
      () => makeServiceConfig({ ...base, blobStore: "s3://b-1/p", s3AccessKeyId: "id" }),
      /S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together/
    )
    const keyed = makeServiceConfig({
      ...base,
      blobStore: "s3://b-1/p",
      s3AccessKeyId: "id",
      s3SecretAccessKey: "a-secret"
    })
    assert.notInclude(
      String(keyed.blobStore._tag === "S3" && keyed.blobStore.credentials?.secretAccessKey),
      "a-secret"
    )
    assert.notInclude(Util.inspect(keyed, { depth: 5 }), "a-secret", "the secret is redacted")
  })
})
