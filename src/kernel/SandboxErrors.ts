import { Schema } from "effect"
import { wire } from "./ApiError.ts"

// Errors of sandbox sessions (commands, files, the gateway), with the status,
// code and message each answers with.

export class CommandNotFound extends Schema.TaggedError<CommandNotFound>()("CommandNotFound", {}) {
  readonly status = 404
  readonly code = "command_not_found"
  override readonly message = "Command not found."
  static readonly Wire = wire(this, () => new CommandNotFound())
}

/** Stdin to, or a kill of, a command that has already ended. */
export class CommandNotRunning extends Schema.TaggedError<CommandNotRunning>()("CommandNotRunning", {}) {
  readonly status = 409
  readonly code = "command_not_running"
  override readonly message = "The command has already ended."
  static readonly Wire = wire(this, () => new CommandNotRunning())
}

/** Stdin to a command whose stdin was closed (`eof`, or a foreground command's). */
export class StdinClosed extends Schema.TaggedError<StdinClosed>()("StdinClosed", {}) {
  readonly status = 409
  readonly code = "stdin_closed"
  override readonly message = "The command's standard input is closed."
  static readonly Wire = wire(this, () => new StdinClosed())
}

/**
 * Stdin the command (or the session's commands together) has not read yet
 * would pass its bound: nothing of the write is taken, and the client retries
 * once the program reads.
 */
export class StdinFull extends Schema.TaggedError<StdinFull>()("StdinFull", {
  detail: Schema.String
}) {
  readonly status = 429
  readonly code = "stdin_full"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new StdinFull({ detail: message }))
}

/** The sandbox runs `SANDBOX_MAX_TASKS` processes: a new one cannot start until some end. */
export class ProcessLimitReached extends Schema.TaggedError<ProcessLimitReached>()(
  "ProcessLimitReached",
  {}
) {
  readonly status = 409
  readonly code = "process_limit"
  override readonly message =
    "The sandbox is at its process limit (SANDBOX_MAX_TASKS): kill some of its processes and try again."
  static readonly Wire = wire(this, () => new ProcessLimitReached())
}

export class FileNotFound extends Schema.TaggedError<FileNotFound>()("FileNotFound", {}) {
  readonly status = 404
  readonly code = "file_not_found"
  override readonly message = "File not found."
  static readonly Wire = wire(this, () => new FileNotFound())
}

/** A session with `UPLOADS_IN_FLIGHT` uploads under way takes no other until one ends. */
export class TooManyUploads extends Schema.TaggedError<TooManyUploads>()("TooManyUploads", {}) {
  readonly status = 429
  readonly code = "too_many_uploads"
  override readonly message =
    "The session has 4 uploads under way, the most it takes at once: retry when one has ended."
  static readonly Wire = wire(this, () => new TooManyUploads())
}

/** A file over the transfer limit, either way. */
export class FileTooLarge extends Schema.TaggedError<FileTooLarge>()("FileTooLarge", {}) {
  readonly status = 413
  readonly code = "file_too_large"
  override readonly message = "File exceeds the 16 MiB (16777216 bytes) transfer limit."
  static readonly Wire = wire(this, () => new FileTooLarge())
}

/** A gateway request for a port nothing in the sandbox listens on. */
export class PortNotListening extends Schema.TaggedError<PortNotListening>()("PortNotListening", {}) {
  readonly status = 502
  readonly code = "port_not_listening"
  override readonly message = "Nothing in the sandbox accepts connections on that port."
  static readonly Wire = wire(this, () => new PortNotListening())
}

/** A mkdir or a move onto a path that is taken (without `overwrite`). */
export class FileExists extends Schema.TaggedError<FileExists>()("FileExists", {}) {
  readonly status = 409
  readonly code = "file_exists"
  override readonly message = "Something is already at that path."
  static readonly Wire = wire(this, () => new FileExists())
}

/** A directory removed without `recursive`, or replaced by a move, that still holds entries. */
export class DirectoryNotEmpty extends Schema.TaggedError<DirectoryNotEmpty>()("DirectoryNotEmpty", {}) {
  readonly status = 409
  readonly code = "directory_not_empty"
  override readonly message = "The directory is not empty: remove it with recursive=true."
  static readonly Wire = wire(this, () => new DirectoryNotEmpty())
}

/** A directory where a file was expected, or a file where a directory was (a list, a watch, a parent). */
export class WrongFileType extends Schema.TaggedError<WrongFileType>()("WrongFileType", {
  detail: Schema.String
}) {
  readonly status = 409
  readonly code = "wrong_file_type"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new WrongFileType({ detail: message }))
}

export class WatchNotFound extends Schema.TaggedError<WatchNotFound>()("WatchNotFound", {}) {
  readonly status = 404
  readonly code = "watch_not_found"
  override readonly message = "Watch not found."
  static readonly Wire = wire(this, () => new WatchNotFound())
}

/** A session with its most watches (`MAX_WATCHES`) starts no other until one is deleted. */
export class TooManyWatches extends Schema.TaggedError<TooManyWatches>()("TooManyWatches", {}) {
  readonly status = 429
  readonly code = "too_many_watches"
  override readonly message =
    "The session has 8 watches, the most it holds at once: delete one (ended ones count until deleted)."
  static readonly Wire = wire(this, () => new TooManyWatches())
}
