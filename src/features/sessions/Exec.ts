import { Effect, Metric, Option, Stream } from "effect"
import type { Audit } from "../audit/Audit.ts"
import { InvalidField, type InvalidRequest, SessionNotOpen } from "../../kernel/Errors.ts"
import type { Owner } from "../../kernel/Owner.ts"
import {
  type CommandInfo,
  DEFAULT_EXEC_TIMEOUT_SECONDS,
  ENV_NAME,
  EXEC_LIMITS,
  type ExecRequest,
  type ExecResult,
  type KillRequest,
  type StdinRequest
} from "../../kernel/Sandbox.ts"
import {
  CommandNotFound,
  CommandNotRunning,
  ProcessLimitReached,
  StdinClosed,
  StdinFull
} from "../../kernel/SandboxErrors.ts"
import type { SandboxRuntime } from "../../runtime/SessionRuntime.ts"
import {
  type Command,
  type CommandRegistry as Commands,
  signalName,
  signalNumber,
  type StartFailed
} from "../../runtime/Exec.ts"
import { resolveInSandbox } from "../../runtime/SandboxPath.ts"

/** Commands started through the exec API and PTYs, in `/metrics`. */
export const commandsStarted = Metric.counter("rbs_sandbox_commands_total", {
  description: "Commands started in sandboxes (exec, background, PTY)"
})

export type FindError = CommandNotFound
/** What the exec, stdin and kill routes answer, a body that does not decode included. */
export type ExecError = InvalidField | InvalidRequest | ProcessLimitReached | SessionNotOpen | StdinFull
export type StdinError =
  CommandNotFound | InvalidField | InvalidRequest | CommandNotRunning | StdinClosed | StdinFull

/**
 * Refuses `bytes` more of stdin when the command's unread stdin, or its
 * session's, would pass its bound: what the service and the sandbox hold for
 * a program that does not read stays bounded, and the writer retries.
 */
const stdinRoom = (commands: Commands, command: Command | undefined, bytes: number) => {
  const mine = command?.stdinUnread() ?? 0
  const all = commands.stdinUnread()
  const mib = (value: number) => `${Math.round(value / 1024 / 1024)} MiB`
  if (mine + bytes > EXEC_LIMITS.stdinUnreadPerCommand)
    return Effect.fail(
      new StdinFull({
        detail: `The command has not read ${mine} bytes of its standard input yet, and takes at most ${mib(EXEC_LIMITS.stdinUnreadPerCommand)} unread: retry once it reads.`
      })
    )
  if (all + bytes > EXEC_LIMITS.stdinUnreadPerSession)
    return Effect.fail(
      new StdinFull({
        detail: `The session's commands have not read ${all} bytes of their standard input yet, and take at most ${mib(EXEC_LIMITS.stdinUnreadPerSession)} unread together: retry once they read.`
      })
    )
  return Effect.void
}
export type KillError = CommandNotFound | InvalidField | InvalidRequest | CommandNotRunning

/** A command as the API shows it. */
export const infoOf = (sessionId: string, command: Command): CommandInfo => ({
  id: command.id,
  object: "command",
  session_id: sessionId,
  command: command.request.command,
  cwd: command.request.cwd,
  background: command.request.background,
  status: command.status,
  exit_code: command.exitCode,
  signal: signalName(command.signal),
  oom_killed: command.oomKilled,
  pid: command.process?.pid ?? null,
  started_at: command.startedAt,
  ended_at: command.endedAt,
  stdout_bytes: command.stdoutBytes,
  stderr_bytes: command.stderrBytes,
  output_dropped_bytes: command.log.dropped
})

const decodeData = (field: string, data: string, encoding: "utf8" | "base64" | undefined) => {
  if (encoding !== "base64") return Effect.succeed(Buffer.from(data))
  // Node's decoder skips what is not base64; a client's typo must not be written as garbage.
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(data.replace(/\s/g, ""))) return Effect.fail(new InvalidField({ field }))
  return Effect.succeed(Buffer.from(data, "base64"))
}

/** Collects a stream of output up to a cap, saying whether it passed it. */
class Capped {
  private readonly chunks: Array<Buffer> = []
  private size = 0
  truncated = false
  add(data: Buffer) {
    const room = EXEC_LIMITS.outputBytes - this.size
    if (room <= 0) {
      this.truncated = true
      return
    }
    const kept = data.length > room ? data.subarray(0, room) : data
    if (kept.length < data.length) this.truncated = true
    this.chunks.push(Buffer.from(kept))
    this.size += kept.length
  }
  text() {
    return Buffer.concat(this.chunks).toString("utf8")
  }
}

const startFailure = (
  error: StartFailed
): Effect.Effect<never, InvalidField | ProcessLimitReached | SessionNotOpen> => {
  if (error.reason === "cwd") return Effect.fail(new InvalidField({ field: "cwd" }))
  if (error.reason === "process_limit") return Effect.fail(new ProcessLimitReached())
  return Effect.fail(new SessionNotOpen())
}

/**
 * `POST /v1/sessions/{id}/exec` on the node that runs the sandbox: a
 * foreground command answers with its exit and output (each capped at 1 MiB,
 * `truncated` past it; the whole is in its stream); a background one answers
 * at once with the command. Started commands are audited
 * (`command.started`), the event written beside the command's start rather
 * than before it, so it adds no wait.
 */
export const execute = (
  audit: Audit["Service"],
  sessionId: string,
  runtime: SandboxRuntime,
  owner: Owner,
  input: ExecRequest
) =>
  Effect.gen(function* () {
    const strings = typeof input.command === "string" ? [input.command] : input.command
    const sizes = strings.map((text) => Buffer.byteLength(text))
    if (
      sizes.some((size) => size > EXEC_LIMITS.commandBytes) ||
      sizes.reduce((sum, size) => sum + size + 1, 0) > EXEC_LIMITS.argvBytes
    ) {
      return yield* new InvalidField({ field: "command" })
    }
    const cwd = resolveInSandbox(input.cwd ?? ".")
    if (cwd === undefined) return yield* new InvalidField({ field: "cwd" })
    const env = input.env ?? {}
    const envBytes = Object.entries(env).reduce(
      (sum, [name, value]) => sum + name.length + value.length + 2,
      0
    )
    const names = Object.keys(env)
    if (
      names.length > EXEC_LIMITS.envVars ||
      envBytes > EXEC_LIMITS.envBytes ||
      !names.every((name) => ENV_NAME.test(name))
    ) {
      return yield* new InvalidField({ field: "env" })
    }
    const stdin =
      input.stdin === undefined ? undefined : yield* decodeData("stdin", input.stdin, input.stdin_encoding)
    if (stdin !== undefined && stdin.length > EXEC_LIMITS.stdinBytes)
      return yield* new InvalidField({ field: "stdin" })
    if (stdin !== undefined) yield* stdinRoom(runtime.exec.commands, undefined, stdin.length)
    const background = input.background ?? false
    const timeoutSeconds = input.timeout_seconds ?? (background ? undefined : DEFAULT_EXEC_TIMEOUT_SECONDS)
    const stdout = new Capped()
    const stderr = new Capped()
    const started = Date.now()
    const command = yield* runtime.exec.commands
      .start(
        {
          command: input.command,
          cwd,
          env,
          background,
          timeoutMs: timeoutSeconds === undefined ? undefined : timeoutSeconds * 1000
        },
        background ? undefined : (stream, data) => (stream === "stdout" ? stdout : stderr).add(data)
      )
      .pipe(Effect.catchTag("StartFailed", startFailure))
    yield* Metric.update(commandsStarted, 1)
    if (stdin !== undefined) command.write(stdin, !background)
    else if (!background) command.write(Buffer.alloc(0), true)
    const audited = audit.record(owner, {
      action: "command.started",
      targetType: "session",
      targetId: sessionId,
      details: { command_id: command.id, background }
    })
    if (background) {
      yield* audited
      return { background: true as const, info: infoOf(sessionId, command) }
    }
    yield* Effect.all([audited, command.done], { concurrency: 2, discard: true })
    const result: ExecResult = {
      ...infoOf(sessionId, command),
      stdout: stdout.text(),
      stderr: stderr.text(),
      truncated: stdout.truncated || stderr.truncated,
      duration_ms: Date.now() - started
    }
    return { background: false as const, result }
  })

export const find = (commands: Commands, cid: string) => {
  const command = commands.get(cid)
  return command === undefined ? Effect.fail(new CommandNotFound()) : Effect.succeed(command)
}

/**
 * `POST .../commands/{cid}/stdin`: 409 once the command ended or its stdin
 * was closed, 429 `stdin_full` while it (or its session) holds too much
 * unread.
 */
export const writeStdin = (commands: Commands, command: Command, input: StdinRequest) =>
  Effect.gen(function* () {
    const data = yield* decodeData("data", input.data ?? "", input.encoding)
    if (data.length > EXEC_LIMITS.stdinBytes) return yield* new InvalidField({ field: "data" })
    if (!command.running) return yield* new CommandNotRunning()
    yield* stdinRoom(commands, command, data.length)
    if (!command.write(data, input.eof ?? false)) return yield* new StdinClosed()
    return { written: data.length, eof: input.eof ?? false }
  })

/** `POST .../commands/{cid}/kill`: SIGTERM, then SIGKILL after 5 s, unless another signal is named. */
export const kill = (command: Command, input: KillRequest) =>
  Effect.gen(function* () {
    const signal = signalNumber(input.signal ?? "SIGTERM")
    if (signal === undefined) return yield* new InvalidField({ field: "signal" })
    if (!command.kill(signal)) return yield* new CommandNotRunning()
    return command
  })

const SSE_KEEPALIVE = "15 seconds"

/**
 * A command's output as server-sent events, from the record after `after`
 * (a `Last-Event-ID`): `stdout` and `stderr` events (`data` a JSON object
 * `{ "data": ... }`, UTF-8 text, or base64 with `encoding=base64`), then
 * `exit` (`{ status, exit_code, signal }`), after which the stream ends.
 * Each event's `id` is its record's number: a client that reconnects with
 * the last one it saw gets the next, none twice. A comment every 15 s keeps
 * idle connections open through proxies.
 */
export const events = (
  command: Command,
  after: number,
  encoding: "utf8" | "base64"
): Stream.Stream<Uint8Array> =>
  Stream.suspend(() => {
    const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() }
    const encodeData = (kind: "stdout" | "stderr", data: Buffer) =>
      encoding === "base64" ? data.toString("base64") : decoders[kind].decode(data, { stream: true })
    // One step: the records after `seen` as events, else a wait for more (a comment when it lasts 15 s).
    const step = (
      seen: number
    ): Effect.Effect<readonly [ReadonlyArray<Uint8Array>, Option.Option<number>]> => {
      const records = command.log.read(seen)
      if (records.length > 0) {
        const out: Array<Uint8Array> = []
        for (const record of records) {
          if (record.kind === "exit") {
            out.push(Buffer.from(`id: ${record.id}\nevent: exit\ndata: ${record.data.toString()}\n\n`))
            return Effect.succeed([out, Option.none()])
          }
          const data = JSON.stringify({ data: encodeData(record.kind, record.data) })
          out.push(Buffer.from(`id: ${record.id}\nevent: ${record.kind}\ndata: ${data}\n\n`))
        }
        return Effect.succeed([out, Option.some(records[records.length - 1]!.id)])
      }
      if (command.log.ended && seen >= command.log.records) return Effect.succeed([[], Option.none()])
      return Effect.map(
        Effect.timeoutOption(command.log.waitBeyond(seen), SSE_KEEPALIVE),
        (woke) => [Option.isNone(woke) ? [Buffer.from(": keep-alive\n\n")] : [], Option.some(seen)] as const
      )
    }
    return Stream.concat(
      Stream.succeed<Uint8Array>(Buffer.from(": stream\n\n")),
      Stream.paginate(after, (seen: number) => Effect.suspend(() => step(seen)))
    )
  })
