import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { FileChange, FileTransfer } from "../../../src/runtime/Exec.ts"
import * as Watches from "../../../src/runtimes/sandbox/Watches.ts"

// The watches' bookkeeping against a file system that reports what the test makes it report: the
// supervisor's side is tested on real sandboxes (Files.test.ts).

/** Files whose one watch hands its change listener to the test. */
const fake = () => {
  let emit: (change: FileChange) => void = () => undefined
  const files = {
    watch: (_path: string, _recursive: boolean, onChange: (change: FileChange) => void) =>
      Effect.sync(() => {
        emit = onChange
        return { stop: () => undefined }
      })
  } as unknown as FileTransfer
  return { files, emit: (change: FileChange) => emit(change) }
}

const change = (path: string): FileChange => ({ type: "create", path, to: null, directory: false })

describe("Watches", () => {
  it.effect(
    "keep the newest changes by count and by bytes, and tell a reader further behind that it lost some",
    () =>
      Effect.gen(function* () {
        const { files, emit } = fake()
        const watch = yield* Watches.make(files).start("/root", true)
        for (let i = 1; i <= Watches.KEPT_CHANGES + 500; i++) emit(change(`/root/f${i}`))
        const behind = watch.read(0)
        assert.isTrue(behind.lost)
        assert.lengthOf(behind.changes, Watches.KEPT_CHANGES)
        assert.strictEqual(behind.changes[0]!.id, 501)
        const caughtUp = watch.read(Watches.KEPT_CHANGES + 498)
        assert.isFalse(caughtUp.lost)
        assert.deepStrictEqual(
          caughtUp.changes.map((each) => each.id),
          [Watches.KEPT_CHANGES + 499, Watches.KEPT_CHANGES + 500]
        )

        // Long paths: the byte bound keeps far fewer of them.
        const long = `/root/${"x".repeat(4000)}`
        for (let i = 0; i < 2000; i++) emit(change(`${long}${i}`))
        const kept = watch.read(0).changes
        assert.isBelow(kept.length, 300)
        assert.strictEqual(kept[kept.length - 1]!.id, watch.changes, "the newest are the ones kept")
        assert.deepStrictEqual(
          kept.map((each) => each.id),
          kept.map((_, at) => kept[0]!.id + at)
        )
      })
  )

  it.effect("a session holds MAX_WATCHES at once; a stopped one frees its place", () =>
    Effect.gen(function* () {
      const registry = Watches.make(fake().files)
      const started = []
      for (let i = 0; i < Watches.MAX_WATCHES; i++) started.push(yield* registry.start("/tmp", false))
      const full = yield* Effect.flip(registry.start("/tmp", false))
      assert.strictEqual(full._tag, "WatchesFull")
      assert.isTrue(registry.stop(started[0]!.id))
      assert.isFalse(registry.stop(started[0]!.id))
      yield* registry.start("/tmp", false)
      assert.lengthOf(registry.list(), Watches.MAX_WATCHES)
    })
  )
})
