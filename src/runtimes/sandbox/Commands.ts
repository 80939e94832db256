import { Deferred, Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { OutputBudget, OutputLog } from "./OutputLog.ts"
import type { ExitStatus, Process, SupervisorLink } from "./Supervisor.ts"
import { SANDBOX_ENDED, type SupervisorError } from "../../runtime/SupervisorError.ts"
import {
  type Command as CommandContract,
  type CommandRegistry,
  type CommandStatus,
  type OutputListener,
  signalName,
  type StartRequest,
  StartFailed
} from "../../runtime/Exec.ts"

/** Output of one command kept for streams and resumes (more is counted, not kept). */
export const OUTPUT_KEPT_BYTES = 64 * 1024 * 1024
/** Output of all of a session's remembered commands kept together, on the data dir's disk. */
export const OUTPUT_KEPT_PER_SESSION = 256 * 1024 * 1024
/** Of which in the service's memory (small logs); the rest is in files. */
export const OUTPUT_IN_MEMORY_PER_SESSION = 8 * 1024 * 1024
/** Commands a sandbox remembers; beyond it the oldest finished ones are forgotten. */
export const COMMANDS_KEPT = 1000
/** After a kill's SIGTERM, how long before SIGKILL. */
export const KILL_GRACE_MS = 5_000

/** One command in a sandbox: its process, its output log, its fate. */
export class Command implements CommandContract {
  readonly id = `cmd_${Crypto.randomUUID()}`
  status: CommandStatus = "running"
  exitCode: number | null = null
  signal: number | null = null
  endedAt: Date | null = null
  stdoutBytes = 0
  stderrBytes = 0
  /** Whether the kernel killed it for the sandbox's memory (`oom_killed`). */
  oomKilled = false
  private killTimer: NodeJS.Timeout | undefined
  private deadline: NodeJS.Timeout | undefined
  private stdinClosed = false
  private readonly finished = Deferred.makeUnsafe<void>()
  /** Completes once it has ended and its exit is in the log. */
  readonly done: Effect.Effect<void> = Deferred.await(this.finished)
  /** Undefined when its program could not be started (it ended with 127 at once). */
  process: Process | undefined
  readonly request: StartRequest
  readonly startedAt: Date
  readonly log: OutputLog
  private readonly oomKills: () => number
  private readonly oomKillsAtStart: number

  constructor(request: StartRequest, startedAt: Date, log: OutputLog, oomKills: () => number = () => 0) {
    this.request = request
    this.startedAt = startedAt
    this.log = log
    this.oomKills = oomKills
    this.oomKillsAtStart = oomKills()
  }

  get running() {
    return this.status === "running"
  }

  output(stream: "stdout" | "stderr", data: Buffer) {
    if (stream === "stdout") this.stdoutBytes += data.length
    else this.stderrBytes += data.length
    this.log.append(stream, data)
  }

  ended(exit: ExitStatus, at: Date) {
    clearTimeout(this.killTimer)
    clearTimeout(this.deadline)
    this.exitCode = exit.code
    this.signal = exit.signal
    this.endedAt = at
    // The kernel says how many it killed for memory, not which: a command that died of SIGKILL (or a
    // shell saying so, 137), not sent by the service (a kill, a timeout), while the sandbox's count rose
    // is taken for one of them.
    const killed =
      exit.signal === Os.constants.signals.SIGKILL || exit.code === 128 + Os.constants.signals.SIGKILL
    this.oomKilled = this.status === "running" && killed && this.oomKills() > this.oomKillsAtStart
    if (this.status === "running") this.status = "exited"
    this.log.append(
      "exit",
      Buffer.from(
        JSON.stringify({
          status: this.status,
          exit_code: this.exitCode,
          signal: signalName(this.signal),
          oom_killed: this.oomKilled
        })
      )
    )
    Deferred.doneUnsafe(this.finished, Effect.void)
  }

  /** Stdin, while it runs and its stdin is open: false otherwise. */
  write(data: Buffer, eof: boolean): boolean {
    const process = this.process
    if (!this.running || this.stdinClosed || process === undefined) return false
    if (data.length > 0) process.write(data)
    if (eof) {
      this.stdinClosed = true
      process.closeStdin()
    }
    return true
  }

  stdinUnread(): number {
    return this.running ? (this.process?.stdinUnread() ?? 0) : 0
  }

  /** `signal` to its process group; SIGTERM (the default) is followed by SIGKILL after a grace. */
  kill(signal: number, status: CommandStatus = "killed"): boolean {
    const process = this.process
    if (!this.running || process === undefined) return false
    this.status = status
    process.signal(signal)
    if (signal === Os.constants.signals.SIGTERM) {
      this.killTimer = setTimeout(() => process.signal(Os.constants.signals.SIGKILL), KILL_GRACE_MS)
    }
    return true
  }

  armTimeout(ms: number) {
    this.deadline = setTimeout(() => this.kill(Os.constants.signals.SIGTERM, "timed_out"), ms)
  }

  hangUp() {
    clearTimeout(this.killTimer)
    clearTimeout(this.deadline)
    this.process?.hangUp()
  }
}

/** How a refused spawn fails a start; undefined when its program could not be run (a command ending with 127). */
const refusal = (error: SupervisorError): StartFailed["reason"] | undefined => {
  if (error.message.startsWith("cwd ")) return "cwd"
  if (error.message.startsWith("fork: ")) return "process_limit"
  if (error.sandboxEnded) return "gone"
  return undefined
}

/**
 * A sandbox's commands: started through its supervisor, each with an output
 * log in the sandbox's dir, remembered (the last `COMMANDS_KEPT`) until the
 * session ends; a forgotten command's log goes with it. Their logs share one
 * budget: `OUTPUT_KEPT_PER_SESSION` kept, `OUTPUT_IN_MEMORY_PER_SESSION` of
 * it in memory. Lives on the node that runs the sandbox; other nodes reach
 * it through the session door.
 */
export class Commands implements CommandRegistry {
  private readonly byId = new Map<string, Command>()
  private readonly link: SupervisorLink
  private readonly dir: string
  private readonly budget = new OutputBudget(OUTPUT_KEPT_PER_SESSION, OUTPUT_IN_MEMORY_PER_SESSION)
  private readonly oomKills: () => number
  private closed = false

  /** `oomKills`: how many of the sandbox's processes the kernel has killed for memory so far (`OomKills`). */
  constructor(link: SupervisorLink, dir: string, oomKills: () => number = () => 0) {
    this.link = link
    this.dir = dir
    this.oomKills = oomKills
    Fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  }

  /**
   * Starts a command; `listener` sees its output as it comes (a foreground
   * exec collects it). A program that cannot be run is a command that ended
   * with 127, its reason on stderr, as a shell says it.
   */
  start(request: StartRequest, listener?: OutputListener): Effect.Effect<Command, StartFailed> {
    return Effect.suspend(() => {
      if (this.closed) return Effect.fail(new StartFailed({ reason: "gone", message: SANDBOX_ENDED }))
      const command = new Command(
        request,
        new Date(),
        new OutputLog(
          Path.join(this.dir, `${Date.now()}-${Crypto.randomBytes(4).toString("hex")}.log`),
          OUTPUT_KEPT_BYTES,
          this.budget
        ),
        this.oomKills
      )
      const argv =
        typeof request.command === "string" ? ["/bin/sh", "-c", request.command] : [...request.command]
      const spawn = this.link.spawn(
        { argv, env: request.env, cwd: request.cwd, pty: request.pty },
        (stream, data) => {
          command.output(stream, data)
          listener?.(stream, data)
        },
        (exit) => command.ended(exit, new Date())
      )
      // Once its process runs, the command is remembered whatever happens to the caller's fiber.
      return Effect.uninterruptibleMask((restore) =>
        restore(spawn).pipe(
          Effect.matchEffect({
            onFailure: (error) => {
              const reason = refusal(error)
              if (reason !== undefined)
                return Effect.fail(new StartFailed({ reason, message: error.message }))
              return Effect.sync(() => {
                const text = Buffer.from(`${error.message}\n`)
                command.output("stderr", text)
                listener?.("stderr", text)
                command.ended({ code: 127, signal: null }, new Date())
                this.remember(command)
                return command
              })
            },
            onSuccess: (process) =>
              Effect.sync(() => {
                command.process = process
                this.remember(command)
                // Armed unless it has ended already (its exit may come with its start).
                if (request.timeoutMs !== undefined && command.running) command.armTimeout(request.timeoutMs)
                return command
              })
          })
        )
      )
    })
  }

  private remember(command: Command) {
    this.byId.set(command.id, command)
    if (this.byId.size <= COMMANDS_KEPT) return
    for (const [id, old] of this.byId) {
      if (!old.running) {
        old.log.close()
        this.byId.delete(id)
        return
      }
    }
  }

  get(id: string): Command | undefined {
    return this.byId.get(id)
  }

  /** Newest first. */
  list(): Array<Command> {
    return [...this.byId.values()].reverse()
  }

  stdinUnread(): number {
    let unread = 0
    for (const command of this.byId.values()) unread += command.stdinUnread()
    return unread
  }

  /** The sandbox is going: every command with it. */
  close() {
    this.closed = true
    for (const command of this.byId.values()) {
      command.hangUp()
      command.log.close()
    }
  }
}
