import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as FsSync from "node:fs"
import { until } from "../../support/Poll.ts"
import { killGroup, SPAWNER, start } from "../../../src/runtimes/browser/Spawner.ts"

// The resident launcher (native/spawner.c) with small shell programs in place of Chromium: what the
// pool relies on (the endpoint line, the exit, the error text, the process group) without a browser.

const sh = (script: string, env: NodeJS.ProcessEnv = {}, timeoutMs = 5_000) =>
  Effect.promise(() => start("/bin/sh", ["-c", script], env, timeoutMs))

/** The parent and the process group of a running pid, from /proc. */
const stat = (pid: number) => {
  const text = FsSync.readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
  return { ppid: Number(fields[1]), pgrp: Number(fields[2]) }
}

/** Running or exiting: neither gone nor a zombie. */
const alive = (pid: number) => {
  try {
    const text = FsSync.readFileSync(`/proc/${pid}/stat`, "utf8")
    return text.charAt(text.lastIndexOf(")") + 2) !== "Z"
  } catch {
    return false
  }
}

const commandOf = (pid: number) => FsSync.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0]

describe("rbs-spawner", () => {
  it.effect("is built by the set-up", () => Effect.sync(() => assert.isTrue(FsSync.existsSync(SPAWNER))))

  it.effect(
    "starts a program from its own small process, in a group of its own, with the env given; tells its endpoint and its exit",
    () =>
      Effect.gen(function* () {
        const spawned = yield* sh(
          'echo starting >&2; echo "DevTools listening on ws://127.0.0.1:9/devtools/browser/x-$ONLY" >&2; sleep 30',
          { ONLY: "this" }
        )
        assert.strictEqual(
          yield* Effect.promise(() => spawned.endpoint),
          "ws://127.0.0.1:9/devtools/browser/x-this"
        )
        const { ppid, pgrp } = stat(spawned.pid)
        assert.strictEqual(pgrp, spawned.pid, "the program leads its own process group")
        assert.notStrictEqual(ppid, process.pid, "the service did not fork it")
        assert.strictEqual(commandOf(ppid), SPAWNER)
        assert.isFalse(spawned.hasExited())
        killGroup(spawned.pid)
        yield* Effect.promise(() => spawned.exited)
        assert.isTrue(spawned.hasExited())
      })
  )

  it.effect("a program that ends before its endpoint line rejects the endpoint with what it wrote last", () =>
    Effect.gen(function* () {
      const spawned = yield* sh("echo 'No usable sandbox! Update your kernel' >&2; exit 1")
      const error = yield* Effect.flip(Effect.tryPromise(() => spawned.endpoint))
      assert.include(String(error.cause), "Chromium exited before DevTools was ready: No usable sandbox!")
      yield* Effect.promise(() => spawned.exited)
    })
  )

  it.effect("a program that never names an endpoint times out; one that cannot be exec'd is refused", () =>
    Effect.gen(function* () {
      const silent = yield* sh("sleep 30", {}, 300)
      const error = yield* Effect.flip(Effect.tryPromise(() => silent.endpoint))
      assert.include(String(error.cause), "no DevTools endpoint after 300 ms")
      killGroup(silent.pid)
      yield* Effect.promise(() => silent.exited)

      const missing = yield* Effect.flip(
        Effect.tryPromise(() => start("/nonexistent/chromium", [], {}, 1_000))
      )
      assert.include(String(missing.cause), "ENOENT")
    })
  )

  it.effect(
    "the rest of a program's group may write on after the program ends; an endpoint line cut by the end of the output still counts; a NUL is refused",
    () =>
      Effect.gen(function* () {
        const marker = `/tmp/rbs-spawner-test-${process.pid}-${Date.now()}`
        const parent = yield* sh(`(sleep 0.3; echo late >&2; echo written > ${marker}) & exit 0`)
        yield* Effect.promise(() => parent.exited)
        // Killed by SIGPIPE at its `echo late`, it would never write the marker.
        yield* until(
          Effect.sync(() => (FsSync.existsSync(marker) ? FsSync.readFileSync(marker, "utf8") : "")),
          (text) => text === "written\n",
          5_000
        )
        FsSync.rmSync(marker)

        const cut = yield* sh('printf "DevTools listening on ws://127.0.0.1:9/cut" >&2')
        assert.strictEqual(yield* Effect.promise(() => cut.endpoint), "ws://127.0.0.1:9/cut")

        const nul = yield* Effect.flip(
          Effect.tryPromise(() => start("/bin/sh", ["-c", "true\0false"], {}, 1_000))
        )
        assert.include(String(nul.cause), "NUL")
      })
  )

  it.effect("a script with nothing else to wait on stays up until its browser's endpoint and exit come", () =>
    Effect.gen(function* () {
      const script = [
        `const { start } = await import(${JSON.stringify(new URL("../../../src/runtimes/browser/Spawner.ts", import.meta.url).href)})`,
        `const spawned = await start("/bin/sh", ["-c", "sleep 0.3; echo 'DevTools listening on ws://127.0.0.1:9/late' >&2; sleep 0.3"], {}, 5000)`,
        "console.log(await spawned.endpoint)",
        "await spawned.exited",
        "console.log('exited')"
      ].join("\n")
      const output = yield* Effect.promise(
        () =>
          new Promise<{ code: number | null; stdout: string }>((resolve) => {
            const child = ChildProcess.spawn(process.execPath, ["--input-type=module", "-e", script], {
              stdio: ["ignore", "pipe", "inherit"]
            })
            let stdout = ""
            child.stdout.on("data", (chunk) => (stdout += chunk))
            child.once("close", (code) => resolve({ code, stdout }))
          })
      )
      assert.deepStrictEqual(output, { code: 0, stdout: "ws://127.0.0.1:9/late\nexited\n" })
    })
  )

  it.effect(
    "when the spawner dies, its programs are killed and told gone, and the next start brings up another",
    () =>
      Effect.gen(function* () {
        const spawned = yield* sh('echo "DevTools listening on ws://127.0.0.1:9/a" >&2; sleep 30')
        yield* Effect.promise(() => spawned.endpoint)
        const spawner = stat(spawned.pid).ppid
        process.kill(spawner, "SIGKILL")
        yield* Effect.promise(() => spawned.exited)
        assert.isTrue(spawned.hasExited())
        // Killed with its group, not left running (its `sleep 30`) without anyone to tell its exit.
        yield* until(
          Effect.sync(() => alive(spawned.pid)),
          (running) => !running,
          5_000
        )

        const next = yield* sh('echo "DevTools listening on ws://127.0.0.1:9/b" >&2; sleep 30')
        assert.strictEqual(yield* Effect.promise(() => next.endpoint), "ws://127.0.0.1:9/b")
        assert.notStrictEqual(stat(next.pid).ppid, spawner)
        killGroup(next.pid)
        yield* Effect.promise(() => next.exited)
      })
  )
})
