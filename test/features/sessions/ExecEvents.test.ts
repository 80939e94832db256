import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Exec from "../../../src/features/sessions/Exec.ts"
import { Command } from "../../../src/runtimes/sandbox/Commands.ts"
import { OutputLog } from "../../../src/runtimes/sandbox/OutputLog.ts"

/** A command with no process: its output and exit as the supervisor would report them. */
const aCommand = Effect.gen(function* () {
  const dir = yield* Effect.acquireRelease(
    Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-events-"))),
    (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
  )
  const log = new OutputLog(Path.join(dir, "out.log"), 1024 * 1024)
  yield* Effect.addFinalizer(() => Effect.sync(() => log.close()))
  return new Command(
    { command: "true", cwd: "/root", env: {}, background: true, timeoutMs: undefined },
    new Date(0),
    log
  )
})

/** Lets the stream's fiber run until it waits again. */
const settle = Effect.gen(function* () {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow
})

const text = (chunks: ReadonlyArray<Uint8Array>) => chunks.map((chunk) => Buffer.from(chunk).toString())

describe("a command's server-sent events", () => {
  it.effect("events as the output comes, a comment after 15 s without any, the exit last", () =>
    Effect.gen(function* () {
      const command = yield* aCommand
      command.output("stdout", Buffer.from("one\n"))
      const seen: Array<Uint8Array> = []
      const reading = yield* Exec.events(command, 0, "utf8").pipe(
        Stream.runForEach((chunk) => Effect.sync(() => seen.push(chunk))),
        Effect.forkChild
      )
      yield* settle
      assert.deepStrictEqual(text(seen), [
        ": stream\n\n",
        'id: 1\nevent: stdout\ndata: {"data":"one\\n"}\n\n'
      ])

      yield* TestClock.adjust("14 seconds")
      yield* settle
      assert.strictEqual(seen.length, 2, "no comment before 15 s")
      yield* TestClock.adjust("1 second")
      yield* settle
      assert.strictEqual(text(seen)[2], ": keep-alive\n\n")

      // A UTF-8 character split across two reads comes out whole.
      const euro = Buffer.from("€")
      command.output("stderr", euro.subarray(0, 1))
      command.output("stderr", euro.subarray(1))
      command.ended({ code: 0, signal: null }, new Date(0))
      yield* Fiber.join(reading)
      assert.deepStrictEqual(text(seen).slice(3), [
        'id: 2\nevent: stderr\ndata: {"data":""}\n\n',
        'id: 3\nevent: stderr\ndata: {"data":"€"}\n\n',
        'id: 4\nevent: exit\ndata: {"status":"exited","exit_code":0,"signal":null,"oom_killed":false}\n\n'
      ])
    })
  )

  it.effect("a resume starts after the last event seen, and a replay of an ended command ends", () =>
    Effect.gen(function* () {
      const command = yield* aCommand
      command.output("stdout", Buffer.from("a"))
      command.output("stdout", Buffer.from("b"))
      command.ended({ code: 3, signal: null }, new Date(0))
      const resumed = yield* Stream.runCollect(Exec.events(command, 1, "base64"))
      assert.deepStrictEqual(text(resumed), [
        ": stream\n\n",
        'id: 2\nevent: stdout\ndata: {"data":"Yg=="}\n\n',
        'id: 3\nevent: exit\ndata: {"status":"exited","exit_code":3,"signal":null,"oom_killed":false}\n\n'
      ])
      assert.deepStrictEqual(text(yield* Stream.runCollect(Exec.events(command, 3, "utf8"))), [
        ": stream\n\n"
      ])
    })
  )
})
