import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as WorkspaceDisk from "../../../src/features/workspaces/WorkspaceDisk.ts"

const tempRoot = Effect.acquireRelease(
  Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-disk-"))),
  (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
)

const read = (dir: string, name: string) => Effect.promise(() => Fs.readFile(Path.join(dir, name), "utf8"))
const write = (dir: string, name: string, text: string) =>
  Effect.promise(async () => {
    await Fs.mkdir(Path.dirname(Path.join(dir, name)), { recursive: true })
    await Fs.writeFile(Path.join(dir, name), text)
  })
const entries = (dir: string) => Effect.promise(() => Fs.readdir(dir).then((names) => names.sort()))

describe("workspace disk", () => {
  it.live("archives, restores atomically, clones, and recovers what a stopped process left", () =>
    Effect.gen(function* () {
      const root = yield* tempRoot
      const disk = WorkspaceDisk.make(root)
      assert.isFalse(yield* disk.exists("w1"))
      const dir = yield* disk.ensure("w1")
      yield* write(dir, "a.txt", "one")
      yield* write(dir, "sub/b.txt", "deep")
      yield* Effect.promise(() => Fs.symlink("/etc/passwd", Path.join(dir, "link")))
      assert.isAtLeast(yield* disk.usedBytes("w1"), 7)

      const archive = Path.join(root, "w1.tar.zst")
      yield* disk.archive("w1", archive)
      const magic = yield* Effect.promise(() => Fs.readFile(archive))
      assert.deepStrictEqual([...magic.subarray(0, 4)], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame")

      yield* write(dir, "a.txt", "two")
      yield* write(dir, "later.txt", "x")
      yield* disk.restore("w1", archive)
      const restored = yield* disk.current("w1")
      assert.notStrictEqual(restored, dir, "a new generation")
      assert.strictEqual(yield* read(restored, "a.txt"), "one")
      assert.strictEqual(yield* read(restored, "sub/b.txt"), "deep")
      assert.strictEqual(yield* Effect.promise(() => Fs.readlink(Path.join(restored, "link"))), "/etc/passwd")
      assert.deepStrictEqual(
        yield* entries(restored),
        ["a.txt", "link", "sub"],
        "nothing of the later content"
      )
      assert.deepStrictEqual(
        yield* entries(disk.dirOf("w1")),
        ["current", Path.basename(restored)],
        "the old one is gone"
      )

      // A restore from a broken archive changes nothing.
      yield* Effect.promise(() => Fs.writeFile(Path.join(root, "bad.tar.zst"), "not an archive"))
      const failed = yield* Effect.flip(disk.restore("w1", Path.join(root, "bad.tar.zst")))
      assert.strictEqual(failed._tag, "DiskError")
      assert.strictEqual(yield* disk.current("w1"), restored)
      assert.deepStrictEqual(yield* entries(disk.dirOf("w1")), ["current", Path.basename(restored)])

      // A process stopped mid-restore: a half-unpacked generation beside the current one.
      const half = Path.join(disk.dirOf("w1"), "gen-halfway")
      yield* write(half, "a.txt", "partial")
      yield* Effect.promise(() => Fs.symlink("gen-halfway", Path.join(disk.dirOf("w1"), "current.tmp-x")))
      assert.strictEqual(yield* disk.recover, 2)
      assert.strictEqual(
        yield* read(yield* disk.current("w1"), "a.txt"),
        "one",
        "the old content, never a mix"
      )

      yield* disk.clone("w1", "w2")
      const copy = yield* disk.current("w2")
      assert.strictEqual(yield* read(copy, "sub/b.txt"), "deep")
      yield* write(copy, "a.txt", "changed")
      assert.strictEqual(yield* read(yield* disk.current("w1"), "a.txt"), "one", "a clone is a copy")

      const scratch = yield* disk.scratch("w1", "sess_x")
      yield* write(scratch, "a.txt", "scratch")
      yield* disk.discard(scratch)
      assert.strictEqual(yield* read(yield* disk.current("w1"), "a.txt"), "one")

      yield* disk.remove("w2")
      assert.isFalse(yield* disk.exists("w2"))
    }).pipe(Effect.scoped)
  )
})
