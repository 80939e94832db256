import { Schema } from "effect"
import { EndedReason, SessionType, TtlSeconds } from "./Session.ts"
import { SandboxResourcesRequest } from "./SandboxResources.ts"

/** Bounds of what a command request may carry (a larger one is 400 `invalid_field` naming it). */
export const EXEC_LIMITS = {
  /** One string (a shell command, an argument), in UTF-8 bytes: Linux's own bound on one (less its NUL). */
  commandBytes: 128 * 1024 - 1,
  /** An argv's strings together, in UTF-8 bytes with a NUL each. */
  argvBytes: 512 * 1024,
  argvItems: 4096,
  envVars: 1000,
  envBytes: 128 * 1024,
  stdinBytes: 16 * 1024 * 1024,
  /** Stdin given to a command that it has not read yet: past it a write is refused (429 `stdin_full`). */
  stdinUnreadPerCommand: 16 * 1024 * 1024,
  /** The same, for all of a session's commands together. */
  stdinUnreadPerSession: 64 * 1024 * 1024,
  timeoutSeconds: 3600,
  /** stdout and stderr each, in a foreground answer (the rest is in the command's stream). */
  outputBytes: 1024 * 1024
} as const

export const DEFAULT_EXEC_TIMEOUT_SECONDS = 600

/** A variable's name: what a shell can set (checked by `Exec`: a record's key schema would drop a bad one silently). */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/

export const CommandField = Schema.Union([
  Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(EXEC_LIMITS.commandBytes)),
  Schema.Array(Schema.String.check(Schema.isMaxLength(EXEC_LIMITS.commandBytes))).check(
    Schema.isMinLength(1),
    Schema.isMaxLength(EXEC_LIMITS.argvItems)
  )
]).annotate({
  description:
    "A string runs through `/bin/sh -c` (pipes, redirects, `&&`); an array runs as argv, without a shell. One string is at most 128 KiB − 1 bytes (UTF-8; Linux's own bound on one argument), an argv at most 4096 strings and 512 KiB in all: beyond, 400 `invalid_field` `command`."
})

/** `POST /v1/sessions/{id}/exec` (and `POST /v1/exec`). */
export const ExecRequest = Schema.Struct({
  command: CommandField,
  cwd: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "Working directory, absolute or relative to `/root` (the home); must exist. Default `/root`."
    })
  ),
  env: Schema.optionalKey(
    Schema.Record(Schema.String, Schema.String).annotate({
      description: `Variables over the sandbox's own (\`PATH\`, \`HOME\`, \`HTTP_PROXY\`, ...): up to ${EXEC_LIMITS.envVars}, ${EXEC_LIMITS.envBytes / 1024} KiB in all.`
    })
  ),
  stdin: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "Written to the command's standard input. A foreground command's stdin is then closed (without `stdin`, at once); a background command's stays open for `.../stdin`."
    })
  ),
  stdin_encoding: Schema.optionalKey(Schema.Literals(["utf8", "base64"])),
  timeout_seconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: EXEC_LIMITS.timeoutSeconds })).annotate({
      description: `Sent SIGTERM (then SIGKILL after 5 s) past this: status \`timed_out\`. Default ${DEFAULT_EXEC_TIMEOUT_SECONDS} in the foreground, none in the background.`
    })
  ),
  background: Schema.optionalKey(
    Schema.Boolean.annotate({
      description:
        "Answer 202 with the command at once instead of waiting for it: follow it with `.../commands/{cid}/stream`."
    })
  )
})
export type ExecRequest = typeof ExecRequest.Type

export const CommandStatus = Schema.Literals(["running", "exited", "killed", "timed_out"])

/** A command as the commands routes show it. */
export const CommandInfo = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("command"),
  session_id: Schema.String,
  command: CommandField,
  cwd: Schema.String,
  background: Schema.Boolean,
  status: CommandStatus,
  exit_code: Schema.NullOr(Schema.Int),
  signal: Schema.NullOr(Schema.String).annotate({
    description: "The signal that ended it (`SIGKILL`), or null."
  }),
  oom_killed: Schema.Boolean.annotate({
    description:
      "True when the kernel killed it for its sandbox's memory limit (`resources.memory_mb`): it died of SIGKILL (or its shell exited 137) while the sandbox's cgroup counted an OOM kill. False while it runs."
  }),
  pid: Schema.NullOr(Schema.Int),
  started_at: Schema.DateFromString,
  ended_at: Schema.NullOr(Schema.DateFromString),
  stdout_bytes: Schema.Number,
  stderr_bytes: Schema.Number,
  output_dropped_bytes: Schema.Number.annotate({
    description: "Output beyond the 64 MiB a command's stream keeps: counted, not kept."
  })
})
export type CommandInfo = typeof CommandInfo.Type

/** A foreground exec's answer: the command and its output. */
export const ExecResult = Schema.Struct({
  ...CommandInfo.fields,
  stdout: Schema.String,
  stderr: Schema.String,
  truncated: Schema.Boolean.annotate({
    description: `True when stdout or stderr passed ${EXEC_LIMITS.outputBytes / 1024 / 1024} MiB: the answer holds the first MiB of each; the whole is in the command's stream.`
  }),
  duration_ms: Schema.Number
})
export type ExecResult = typeof ExecResult.Type

export const CommandList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(CommandInfo)
})

/** `POST .../commands/{cid}/stdin`. */
export const StdinRequest = Schema.Struct({
  data: Schema.optionalKey(Schema.String),
  encoding: Schema.optionalKey(Schema.Literals(["utf8", "base64"])),
  eof: Schema.optionalKey(Schema.Boolean)
})
export type StdinRequest = typeof StdinRequest.Type

/** What `POST .../commands/{cid}/stdin` answers. */
export const StdinResult = Schema.Struct({ written: Schema.Number, eof: Schema.Boolean })
export type StdinResult = typeof StdinResult.Type

/** `POST .../commands/{cid}/kill`. */
export const KillRequest = Schema.Struct({
  signal: Schema.optionalKey(
    Schema.String.annotate({
      description: "A signal name (`SIGTERM`, `TERM`, `KILL`, `INT`, ...); default SIGTERM."
    })
  )
})
export type KillRequest = typeof KillRequest.Type

/** `POST /v1/exec`: a throwaway sandbox for one command. */
export const RunRequest = Schema.Struct({
  ...ExecRequest.fields,
  image: Schema.optionalKey(Schema.String),
  region: Schema.optionalKey(Schema.String),
  ttl_seconds: Schema.optionalKey(TtlSeconds),
  resources: Schema.optionalKey(
    SandboxResourcesRequest.annotate({
      description:
        "The throwaway sandbox's CPUs, memory, disk and processes, as `resources` at `POST /v1/sessions`."
    })
  )
})
export type RunRequest = typeof RunRequest.Type

export const RunResult = Schema.Struct({
  ...ExecResult.fields
})

/** `POST /v1/sessions/bulk-terminate`. */
export const BulkTerminateRequest = Schema.Struct({
  ids: Schema.optionalKey(Schema.Array(Schema.String).check(Schema.isMaxLength(1000))),
  all: Schema.optionalKey(Schema.Boolean),
  session_type: Schema.optionalKey(SessionType)
})
export type BulkTerminateRequest = typeof BulkTerminateRequest.Type

export const BulkTerminateResult = Schema.Struct({
  terminated: Schema.Array(Schema.String),
  /** Ids that were not open sessions of the account (unknown, another account's, already ended). */
  skipped: Schema.Array(Schema.String),
  ended_reason: EndedReason
})
export type BulkTerminateResult = typeof BulkTerminateResult.Type

/** `POST /v1/sessions/{id}/gateway-token`. */
export const GatewayTokenRequest = Schema.Struct({
  port: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 65_535 })).annotate({
      description: "The port a program in the sandbox listens on (required)."
    })
  ),
  ttl_seconds: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 60, maximum: 86_400 })))
})

export const GatewayToken = Schema.Struct({
  url: Schema.String,
  token: Schema.String,
  expires_at: Schema.DateFromString
})

/** One check of `POST /v1/sessions/{id}/self-test`. */
export const SelfTestCheck = Schema.Struct({
  name: Schema.String,
  ok: Schema.Boolean,
  duration_ms: Schema.Number,
  detail: Schema.String
})

export const SelfTestReport = Schema.Struct({
  session_id: Schema.String,
  session_type: SessionType,
  ok: Schema.Boolean,
  checks: Schema.Array(SelfTestCheck)
})
export type SelfTestReport = typeof SelfTestReport.Type

/** A file a browser session downloaded. */
export const DownloadedFile = Schema.Struct({
  name: Schema.String,
  size: Schema.Number,
  modified_at: Schema.DateFromString
})

export const DownloadList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(DownloadedFile)
})

/** An upload's answer. */
export const UploadResult = Schema.Struct({
  path: Schema.String,
  size: Schema.Number
})
export type UploadResult = typeof UploadResult.Type

/** A sandbox's file read whole: its path in the sandbox, and its bytes. */
export const SandboxFile = Schema.Struct({
  path: Schema.String,
  content: Schema.Uint8Array
})
export type SandboxFile = typeof SandboxFile.Type

/** A browser session's upload: the file its pages may be given (`path`, for a file input). */
export const BrowserUploadResult = Schema.Struct({
  object: Schema.Literal("upload"),
  name: Schema.String,
  path: Schema.String.annotate({
    description:
      "Where the session's browser sees the file: give it to a file input (puppeteer's `uploadFile(path)`, CDP's `DOM.setFileInputFiles`)."
  }),
  size: Schema.Number
})

/** Files of sandbox sessions: 16 MB each way. */
export const FILE_TRANSFER_MAX_BYTES = 16 * 1024 * 1024
/** Uploads a session takes at once: each is held whole (up to 16 MiB) before it is written. */
export const UPLOADS_IN_FLIGHT = 4

/** A sandbox's file, directory or link, as a list or stat shows it (a link as a link, not followed). */
export const FileInfo = Schema.Struct({
  object: Schema.Literal("file"),
  name: Schema.String,
  path: Schema.String.annotate({ description: "Its absolute path in the sandbox." }),
  type: Schema.Literals(["file", "directory", "symlink", "other"]),
  size: Schema.Number.annotate({ description: "Bytes (a directory's or a link's own size)." }),
  mode: Schema.String.annotate({ description: 'The permission bits in octal, "0644".' }),
  modified_at: Schema.DateFromString,
  symlink_target: Schema.NullOr(Schema.String).annotate({
    description: "A link's target as written in it (not resolved); null for anything else."
  })
})
export type FileInfo = typeof FileInfo.Type

export const FileInfoList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(FileInfo),
  has_more: Schema.Boolean,
  next_cursor: Schema.NullOr(Schema.String)
})
export type FileInfoList = typeof FileInfoList.Type

/** The most entries one page of a directory lists. */
export const FILE_LIST_MAX = 1000

export const MakeDirectoryRequest = Schema.Struct({
  path: Schema.String,
  parents: Schema.optionalKey(
    Schema.Boolean.annotate({
      description: "Make missing parents too, and accept a directory already there."
    })
  )
})
export type MakeDirectoryRequest = typeof MakeDirectoryRequest.Type

export const MoveFileRequest = Schema.Struct({
  from: Schema.String,
  to: Schema.String,
  overwrite: Schema.optionalKey(
    Schema.Boolean.annotate({ description: "Replace what is at `to` (a file, or an empty directory)." })
  )
})
export type MoveFileRequest = typeof MoveFileRequest.Type

export const FileWatchRequest = Schema.Struct({
  path: Schema.String,
  recursive: Schema.optionalKey(
    Schema.Boolean.annotate({
      description: "Follow every directory below it too, those made later included."
    })
  )
})
export type FileWatchRequest = typeof FileWatchRequest.Type

export const FileWatchInfo = Schema.Struct({
  object: Schema.Literal("file_watch"),
  id: Schema.String,
  session_id: Schema.String,
  path: Schema.String,
  recursive: Schema.Boolean,
  status: Schema.Literals(["watching", "ended"]).annotate({
    description: "`ended` once its directory was removed or moved away: its changes are still read."
  }),
  changes: Schema.Number.annotate({ description: "Changes seen so far: the last one's event id." }),
  created_at: Schema.DateFromString,
  ended_at: Schema.NullOr(Schema.DateFromString)
})
export type FileWatchInfo = typeof FileWatchInfo.Type

export const FileWatchList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(FileWatchInfo)
})
export type FileWatchList = typeof FileWatchList.Type
