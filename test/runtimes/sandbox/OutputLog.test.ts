import { assert, describe, it } from "@effect/vitest"
import * as FsSync from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { OutputBudget, OutputLog } from "../../../src/runtimes/sandbox/OutputLog.ts"

const text = (log: OutputLog) =>
  log
    .read(0)
    .map((record) => `${record.kind}:${record.data.toString()}`)
    .join(",")

describe("OutputLog", () => {
  it("a session's logs share one budget: kept in all, in memory; a closed log gives its share back and its file goes", () => {
    const dir = FsSync.mkdtempSync(Path.join(Os.tmpdir(), "rbs-outputlog-"))
    try {
      const budget = new OutputBudget(200, 100)
      const a = new OutputLog(Path.join(dir, "a.log"), 1000, budget)
      const b = new OutputLog(Path.join(dir, "b.log"), 1000, budget)
      a.append("stdout", Buffer.alloc(55, "a"))
      assert.deepStrictEqual([budget.kept, budget.inMemory], [60, 60])
      assert.isFalse(FsSync.existsSync(Path.join(dir, "a.log")), "small: in memory")
      // Past the session's memory share: to its file at once, though small.
      b.append("stdout", Buffer.alloc(55, "b"))
      assert.isTrue(FsSync.existsSync(Path.join(dir, "b.log")))
      assert.deepStrictEqual([budget.kept, budget.inMemory], [120, 60])
      // Past the session's kept bytes: counted, not kept, in either log; the exit is always written.
      b.append("stdout", Buffer.alloc(55, "c"))
      a.append("stderr", Buffer.alloc(100, "d"))
      assert.deepStrictEqual([a.dropped, b.dropped, budget.kept], [100, 0, 180])
      b.append("stdout", Buffer.alloc(30, "e"))
      assert.strictEqual(b.dropped, 30)
      b.append("exit", Buffer.from("{}"))
      assert.isTrue(b.ended)
      assert.strictEqual(text(b), `stdout:${"b".repeat(55)},stdout:${"c".repeat(55)},exit:{}`)

      b.close()
      assert.isFalse(FsSync.existsSync(Path.join(dir, "b.log")), "a forgotten command's file goes")
      assert.deepStrictEqual([budget.kept, budget.inMemory], [60, 60])
      assert.deepStrictEqual(b.read(0), [], "nothing is read from a closed log")
      a.append("stdout", Buffer.alloc(95, "f"))
      assert.strictEqual(a.dropped, 100, "room again once the other closed")
      a.close()
      assert.deepStrictEqual([budget.kept, budget.inMemory], [0, 0])
    } finally {
      FsSync.rmSync(dir, { recursive: true, force: true })
    }
  })
})
