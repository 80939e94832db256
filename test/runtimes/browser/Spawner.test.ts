import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as FsSync from "node:fs"
import { until } from "../../support/Poll.ts"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Cell from "../../../src/runtimes/browser/Cell.ts"
import { systemView } from "../../../src/runtimes/browser/Isolation.ts"
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

  /**
   * A service in a process of its own (node with the Spawner module) that
   * starts `program` (as `file args...`) and prints `<spawner pid> <program pid>`
   * once it named its endpoint, then waits.
   */
  const service = (file: string, args: ReadonlyArray<string>) =>
    Effect.acquireRelease(
      Effect.promise(
        () =>
          new Promise<{
            readonly child: ChildProcess.ChildProcess
            readonly spawner: number
            readonly pid: number
          }>((resolve, reject) => {
            const script = [
              `const { start } = await import(${JSON.stringify(new URL("../../../src/runtimes/browser/Spawner.ts", import.meta.url).href)})`,
              `const spawned = await start(${JSON.stringify(file)}, ${JSON.stringify(args)}, {}, 5000)`,
              "await spawned.endpoint",
              "const ppid = (await import('node:fs')).readFileSync(`/proc/${spawned.pid}/stat`, 'utf8').split(') ')[1].split(' ')[1]",
              "console.log(`${ppid} ${spawned.pid}`)",
              "setInterval(() => {}, 1000)"
            ].join("\n")
            const child = ChildProcess.spawn(process.execPath, ["--input-type=module", "-e", script], {
              stdio: ["ignore", "pipe", "inherit"]
            })
            child.stdout.once("data", (chunk: Buffer) => {
              const [spawner, pid] = chunk.toString("utf8").trim().split(" ").map(Number)
              resolve({ child, spawner: spawner!, pid: pid! })
            })
            child.once("exit", (code) => reject(new Error(`the service script exited (${code})`)))
          })
      ),
      ({ child, pid }) =>
        Effect.sync(() => {
          killGroup(pid)
          child.kill("SIGKILL")
        })
    )

  const gone = (pid: number, what: string) =>
    until(
      Effect.sync(() => alive(pid)),
      (running) => !running,
      5_000
    ).pipe(Effect.tap((running) => Effect.sync(() => assert.isFalse(running, what))))

  it.live("when the service dies by SIGKILL, the spawner kills every program it started and exits", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { child, spawner, pid } = yield* service("/bin/sh", [
          "-c",
          'echo "DevTools listening on ws://127.0.0.1:9/s" >&2; sleep 300 & sleep 300'
        ])
        assert.strictEqual(commandOf(spawner), SPAWNER)
        assert.isTrue(alive(pid))
        child.kill("SIGKILL")
        yield* gone(pid, "the program dies with its service")
        yield* gone(spawner, "the spawner exits")
      })
    )
  )

  it.live(
    "a program, jailed under a uid of its own or not, dies when the spawner itself is killed, even with no service to kill it",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const line = 'echo "DevTools listening on ws://127.0.0.1:9/j" >&2; exec sleep 300'
          const programs: Array<readonly [string, ReadonlyArray<string>]> = [["/bin/sh", ["-c", line]]]
          // In a cell, under a uid of its own as root (a change of uid clears a parent-death signal).
          const dir = FsSync.mkdtempSync(Path.join(Os.tmpdir(), "rbs-spawner-test-"))
          yield* Effect.addFinalizer(() =>
            Effect.sync(() => FsSync.rmSync(dir, { recursive: true, force: true }))
          )
          FsSync.mkdirSync(Cell.rootOf(dir))
          const cell = Cell.command(
            {
              dir,
              uid: process.getuid?.() === 0 ? 65534 : null,
              openFiles: 1024,
              dataBytes: 0,
              tmpBytes: 0,
              niceness: 0,
              cgroupProcs: [],
              view: systemView("/bin/sh", []),
              downloadsDir: dir
            },
            "/bin/sh",
            ["-c", line]
          )
          programs.push([cell.file, cell.args])
          for (const [file, args] of programs) {
            const { child, spawner, pid } = yield* service(file, args)
            // The service is stopped, so only the kernel (the parent-death signal) can end the program.
            child.kill("SIGSTOP")
            process.kill(spawner, "SIGKILL")
            yield* gone(pid, `${file}: the program dies with its spawner`)
            child.kill("SIGKILL")
          }
        })
      )
  )
})
