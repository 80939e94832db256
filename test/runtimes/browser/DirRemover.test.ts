import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as FsSync from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as DirRemover from "../../../src/runtimes/browser/DirRemover.ts"

// The removal of browsers' profile and temp dirs, on its worker thread.

const tree = (root: string) => {
  for (let i = 0; i < 5; i++) {
    const dir = Path.join(root, `Default-${i}`, "Cache", "Cache_Data")
    FsSync.mkdirSync(dir, { recursive: true })
    for (let j = 0; j < 20; j++) FsSync.writeFileSync(Path.join(dir, `f_${j}`), "x".repeat(100))
    FsSync.symlinkSync("/etc/hostname", Path.join(root, `Default-${i}`, "link"))
  }
  return root
}

describe("DirRemover", () => {
  it.live("removes whole trees, several at once, without following links; a missing path is no error", () =>
    Effect.gen(function* () {
      const base = FsSync.mkdtempSync(Path.join(Os.tmpdir(), "rbs-remover-"))
      try {
        const remover = yield* DirRemover.make
        const roots = [1, 2, 3].map((n) => tree(Path.join(base, `profile-${n}`)))
        yield* Effect.forEach([...roots, Path.join(base, "never-made")], remover.remove, {
          concurrency: "unbounded"
        })
        assert.deepStrictEqual(FsSync.readdirSync(base), [])
        assert.isTrue(FsSync.existsSync("/etc/hostname"), "a link's target is left alone")
      } finally {
        FsSync.rmSync(base, { recursive: true, force: true })
      }
    }).pipe(Effect.scoped)
  )
})
