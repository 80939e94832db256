import { assert, describe, it } from "@effect/vitest"
import * as FsSync from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { executableOf } from "../../../src/runtimes/browser/Chromium.ts"

describe("the Chromium a launch runs", () => {
  it("is the binary Debian's launcher script would exec, not the script (its forks cost a launch about 75 ms of CPU)", () => {
    assert.isTrue(
      FsSync.readFileSync("/usr/bin/chromium", "latin1").startsWith("#!"),
      "Debian's chromium is a script"
    )
    assert.strictEqual(executableOf("/usr/bin/chromium"), "/usr/lib/chromium/chromium")
  })

  it("is any other path as it is: another script, a binary, a path that does not exist", () => {
    const dir = FsSync.mkdtempSync(Path.join(Os.tmpdir(), "rbs-exec-"))
    try {
      const script = Path.join(dir, "chromium")
      FsSync.writeFileSync(script, '#!/bin/sh\nexec /usr/lib/chromium/chromium "$@"\n', { mode: 0o755 })
      assert.strictEqual(executableOf(script), script)
      assert.strictEqual(executableOf("/usr/lib/chromium/chromium"), "/usr/lib/chromium/chromium")
      assert.strictEqual(executableOf(Path.join(dir, "missing")), Path.join(dir, "missing"))
    } finally {
      FsSync.rmSync(dir, { recursive: true, force: true })
    }
  })
})
