import { assert, describe, it } from "@effect/vitest"
import * as FsSync from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Runc from "../../../src/runtimes/sandbox/Runc.ts"

/** A stand-in for runc that fails `failures` times with `message`, then lists one container; it counts its calls. */
const standIn = (dir: string, failures: number, message: string) => {
  const script = Path.join(dir, "runc")
  const calls = Path.join(dir, "calls")
  FsSync.writeFileSync(
    script,
    [
      "#!/bin/sh",
      `echo x >> '${calls}'`,
      `if [ "$(wc -l < '${calls}')" -le ${failures} ]; then echo '${message}' >&2; exit 1; fi`,
      `echo '[{"id":"c1","pid":42,"status":"running"}]'`
    ].join("\n"),
    { mode: 0o755 }
  )
  return { script, calls: () => FsSync.readFileSync(calls, "utf8").split("\n").length - 1 }
}

const vanished = 'time="x" level=error msg="stat /run/r/c2: no such file or directory"'

describe("Runc.list", () => {
  it("asks again when a container is removed while runc lists the root, and fails on anything else", async () => {
    const dir = FsSync.mkdtempSync(Path.join(Os.tmpdir(), "rbs-runc-"))
    try {
      const raced = standIn(Path.join(dir), 2, vanished)
      const listed = await Runc.make(raced.script, Path.join(dir, "root")).list()
      assert.deepStrictEqual(listed, [{ id: "c1", pid: 42, status: "running" }])
      assert.strictEqual(raced.calls(), 3)

      FsSync.rmSync(Path.join(dir, "calls"))
      const broken = standIn(dir, 1, "permission denied")
      const error = await Runc.make(broken.script, Path.join(dir, "root"))
        .list()
        .then(
          () => undefined,
          (e: Error) => e
        )
      assert.match(String(error?.message), /permission denied/)
      assert.strictEqual(broken.calls(), 1, "another failure is not asked again")

      FsSync.rmSync(Path.join(dir, "calls"))
      const gone = standIn(dir, 100, vanished)
      const lasting = await Runc.make(gone.script, Path.join(dir, "root"))
        .list()
        .then(
          () => undefined,
          (e: Error) => e
        )
      assert.match(String(lasting?.message), /no such file or directory/)
      assert.strictEqual(gone.calls(), 5, "five times at most")
    } finally {
      FsSync.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("the real runc lists an empty root as no containers", async () => {
    const dir = FsSync.mkdtempSync(Path.join(Os.tmpdir(), "rbs-runc-"))
    try {
      assert.deepStrictEqual(await Runc.make("runc", Path.join(dir, "root")).list(), [])
    } finally {
      FsSync.rmSync(dir, { recursive: true, force: true })
    }
  })
})
