import { type Effect, Schema } from "effect"
import * as Os from "node:os"
import type * as Net from "node:net"
import type { SupervisorError } from "./SupervisorError.ts"

// The exec, pty and gateway capabilities: programs run in the session (its
// commands with their output, an interactive shell), its files, and its
// ports. A sandbox offers them through its supervisor.

/** How a process ended. */
export interface ExitStatus {
  /** The exit code, or null when a signal ended it (or the session went away). */
  readonly code: number | null
  /** The signal that ended it, or null. */
  readonly signal: number | null
}

export interface SpawnRequest {
  readonly argv: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly cwd?: string | undefined
  /** A PTY of this size (one stream of output), instead of pipes. */
  readonly pty?: { readonly cols: number; readonly rows: number } | undefined
}

export type OutputListener = (stream: "stdout" | "stderr", data: Buffer) => void

/** A process running in the session. */
export interface Process {
  readonly pid: number
  /** Completes when it exits (or its session goes away: code and signal null). */
  readonly exited: Effect.Effect<ExitStatus>
  readonly write: (data: Buffer) => void
  /** Bytes written that the program has not read yet (or that were not dropped as it closed its stdin). */
  readonly stdinUnread: () => number
  readonly closeStdin: () => void
  /** To its whole process group. */
  readonly signal: (signal: number) => void
  readonly resize: (cols: number, rows: number) => void
  /** Stops reading its output until `resume`: it blocks on a full pipe. */
  readonly pause: () => void
  readonly resume: () => void
  /** Hangs up: a process still running is killed with its group. */
  readonly hangUp: () => void
}

export type CommandStatus = "running" | "exited" | "killed" | "timed_out"

const SIGNAL_NAMES = new Map(Object.entries(Os.constants.signals).map(([name, number]) => [number, name]))
export const signalName = (signal: number | null) =>
  signal === null ? null : (SIGNAL_NAMES.get(signal) ?? `SIG${signal}`)
export const signalNumber = (name: string): number | undefined =>
  (Os.constants.signals as Record<string, number>)[
    name.toUpperCase().startsWith("SIG") ? name.toUpperCase() : `SIG${name.toUpperCase()}`
  ]

export interface StartRequest {
  /** As the client gave it: a string (run through `sh -c`) or an argv. */
  readonly command: string | ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  readonly background: boolean
  readonly timeoutMs: number | undefined
  /** A terminal of this size instead of pipes (a PTY's shell). */
  readonly pty?: { readonly cols: number; readonly rows: number } | undefined
}

/** The command could not be started; `reason` says how the route answers, `message` is the session's own. */
export class StartFailed extends Schema.TaggedError<StartFailed>()("StartFailed", {
  reason: Schema.Literals(["cwd", "process_limit", "gone"]),
  message: Schema.String
}) {}

/** One piece of a command's output, or its end. */
export interface LogRecord {
  readonly kind: "stdout" | "stderr" | "exit"
  readonly data: Buffer
  /** Its event id: its number in the log, from 1. A reader that saw id N resumes after it. */
  readonly id: number
}

/** A command's output, numbered from 1, for its streams and their resumes. */
export interface CommandLog {
  /** Records so far. */
  readonly records: number
  /** Whether its exit is in. */
  readonly ended: boolean
  /** Output bytes counted but no longer kept. */
  readonly dropped: number
  /** The records after `after` (0: from the first), about `max` bytes of them (at least one). */
  readonly read: (after: number, max?: number) => Array<LogRecord>
  /** Completes once the log has more than `records` records, or has ended. */
  readonly waitBeyond: (records: number) => Effect.Effect<void>
}

/** One command in the session: its process, its output, its fate. */
export interface Command {
  readonly id: string
  readonly status: CommandStatus
  readonly exitCode: number | null
  readonly signal: number | null
  /** Whether the kernel killed it for its session's memory limit (false while it runs). */
  readonly oomKilled: boolean
  readonly endedAt: Date | null
  readonly stdoutBytes: number
  readonly stderrBytes: number
  /** Completes once it has ended and its exit is in the log. */
  readonly done: Effect.Effect<void>
  /** Undefined when its program could not be started (it ended with 127 at once). */
  readonly process: Process | undefined
  readonly request: StartRequest
  readonly startedAt: Date
  readonly log: CommandLog
  readonly running: boolean
  /** Writes to its stdin (closed with `eof`); false once stdin is closed. */
  write(data: Buffer, eof: boolean): boolean
  /** Stdin given to it that its program has not read yet (0 once it ended). */
  stdinUnread(): number
  /** Signals its group; false once it has ended. */
  kill(signal: number, status?: CommandStatus): boolean
}

/** The session's commands: started, found, listed (newest first). */
export interface CommandRegistry {
  /**
   * Starts a command; `listener` sees its output as it comes (a foreground
   * exec collects it). A program that cannot be run is a command that ended
   * with 127, its reason on stderr, not a failure.
   */
  start(request: StartRequest, listener?: OutputListener): Effect.Effect<Command, StartFailed>
  get(id: string): Command | undefined
  list(): Array<Command>
  /** Stdin given to its running commands that they have not read yet. */
  stdinUnread(): number
}

/** A directory's entry, as the session's file system has it (a link as a link). */
export interface FileEntry {
  readonly name: string
  readonly type: "file" | "directory" | "symlink" | "other"
  readonly size: number
  /** The permission bits (`0o7777` of the mode). */
  readonly mode: number
  readonly modifiedAt: Date
  /** A link's target, as written in it; null for anything else. */
  readonly target: string | null
}

/**
 * A change under a watched directory: made, written to, removed, renamed
 * (`to` where it went), or `overflow`: changes were lost (the kernel's queue
 * filled, or a directory past the watch's bound is not followed), so a
 * reader lists again.
 */
export interface FileChange {
  readonly type: "create" | "modify" | "delete" | "move" | "overflow"
  readonly path: string
  readonly to: string | null
  readonly directory: boolean
}

/** A directory followed in the session, until `stop` or until it is removed. */
export interface DirectoryWatch {
  readonly stop: () => void
}

/**
 * Files in the session: read whole with their size and mode, written through
 * a temporary file renamed into place, listed, made, moved, removed, and
 * directories watched for changes. Each fails with `SupervisorError`: the
 * session's refusal (its message starts with the errno's name, `ENOENT`, for
 * the calls after the first two) or its end (`sandboxEnded`).
 */
export interface FileTransfer {
  readonly readFile: (
    path: string
  ) => Effect.Effect<
    { readonly size: number; readonly mode: number; readonly body: ReadableStream<Uint8Array> },
    SupervisorError
  >
  /** Succeeds with the bytes written. */
  readonly writeFile: (
    path: string,
    mode: number,
    chunks: AsyncIterable<Uint8Array>
  ) => Effect.Effect<number, SupervisorError>
  /** Up to `limit` entries named after `after` ("": from the first), by name; `more` when others follow. */
  readonly list: (
    path: string,
    after: string,
    limit: number
  ) => Effect.Effect<{ readonly entries: ReadonlyArray<FileEntry>; readonly more: boolean }, SupervisorError>
  readonly stat: (path: string) => Effect.Effect<FileEntry, SupervisorError>
  /** Answers the directory made (`parents`: and those above it, none an error if there). */
  readonly mkdir: (path: string, parents: boolean) => Effect.Effect<FileEntry, SupervisorError>
  /** Renames `from` to `to` (`overwrite`: replacing what is there); answers it where it went. */
  readonly move: (from: string, to: string, overwrite: boolean) => Effect.Effect<FileEntry, SupervisorError>
  /** Removes a file, a link or an empty directory; `recursive`: a directory with its contents. */
  readonly remove: (path: string, recursive: boolean) => Effect.Effect<void, SupervisorError>
  /**
   * Follows directory `path` (and, `recursive`, those below it); succeeds
   * once every change is seen. `onEnd` once it is removed or moved away, the
   * session ends, or `stop` was called.
   */
  readonly watch: (
    path: string,
    recursive: boolean,
    onChange: (change: FileChange) => void,
    onEnd: () => void
  ) => Effect.Effect<DirectoryWatch, SupervisorError>
}

/** A watch of the session's, with its changes numbered from 1 for its streams and their resumes. */
export interface FileWatch {
  readonly id: string
  readonly path: string
  readonly recursive: boolean
  readonly createdAt: Date
  /** Set once it ended: stopped, or its directory removed or moved away. */
  readonly endedAt: Date | null
  /** The changes so far: the last one's id. */
  readonly changes: number
  /** The changes after `after` still kept; `lost` when some after it are not (only the newest are). */
  readonly read: (after: number) => {
    readonly lost: boolean
    readonly changes: ReadonlyArray<FileChange & { readonly id: number }>
  }
  /** Completes once there are more than `changes` changes, or the watch has ended. */
  readonly waitBeyond: (changes: number) => Effect.Effect<void>
}

/** The session has as many watches as it may (`max`). */
export class WatchesFull extends Schema.TaggedError<WatchesFull>()("WatchesFull", { max: Schema.Number }) {}

/** The session's watches: started (a bounded number at once), found, listed, stopped. */
export interface WatchRegistry {
  /** Fails with `SupervisorError` as `FileTransfer.watch` does, or `WatchesFull` when the session has its most. */
  readonly start: (
    path: string,
    recursive: boolean
  ) => Effect.Effect<FileWatch, SupervisorError | WatchesFull>
  readonly get: (id: string) => FileWatch | undefined
  /** Newest first. */
  readonly list: () => ReadonlyArray<FileWatch>
  /** Ends and forgets it; false when there is none. */
  readonly stop: (id: string) => boolean
}

/** Commands and files (`exec`). */
export interface ExecCapability {
  readonly commands: CommandRegistry
  readonly files: FileTransfer
  readonly watches: WatchRegistry
}

/** Interactive terminals (`pty`): a shell in a PTY, and the size a resize gives them all. */
export interface PtyCapability {
  /** Fails with `SupervisorError`: the session refused (`fork: ...` when out of processes) or ended. */
  readonly spawn: (request: SpawnRequest, listener: OutputListener) => Effect.Effect<Process, SupervisorError>
  /** The size a new terminal starts with: the last resize, else 80 x 24. */
  readonly size: () => { readonly cols: number; readonly rows: number }
  /** Follows resizes while the terminal is open; call the answer to stop. */
  readonly onResize: (resize: (cols: number, rows: number) => void) => () => void
}

/** A port a program in the session listens on, reached from outside (`gateway`). */
export interface GatewayCapability {
  /** A connection to 127.0.0.1:`port` inside the session: raw bytes both ways. */
  readonly dial: (port: number) => Effect.Effect<Net.Socket, SupervisorError>
  /** Counts bytes through the gateway (out of the session: `up`; into it: `down`) with its egress. */
  readonly count: (up: number, down: number) => void
}
