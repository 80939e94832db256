/**
 * The session actor's messages and their errors: what `SessionEntity` answers
 * and `SessionActors` sends. The entity and RPC tags address persisted
 * messages, so they never change.
 */
import { Schema } from "effect"
import { ClusterSchema, Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import * as PageActions from "../../runtime/Drive.ts"
import { EndedReason } from "../../kernel/Session.ts"
import {
  ConnectionLimitReached,
  InvalidField,
  ServiceUnavailable,
  SessionNotOpen,
  SessionTypeMismatch
} from "../../kernel/Errors.ts"
import { OwnerSchema } from "../../kernel/Owner.ts"
import { SessionRow } from "./SessionsRepo.ts"
import {
  CommandInfo,
  CommandList,
  FileInfo,
  FileInfoList,
  FileWatchInfo,
  FileWatchList,
  FileWatchRequest,
  MakeDirectoryRequest,
  MoveFileRequest,
  ExecRequest,
  ExecResult,
  KillRequest,
  SandboxFile,
  SelfTestReport,
  StdinRequest,
  StdinResult,
  UploadResult
} from "../../kernel/Sandbox.ts"
import {
  CommandNotFound,
  CommandNotRunning,
  DirectoryNotEmpty,
  FileExists,
  FileNotFound,
  FileTooLarge,
  ProcessLimitReached,
  StdinClosed,
  StdinFull,
  TooManyUploads,
  TooManyWatches,
  WatchNotFound,
  WrongFileType
} from "../../kernel/SandboxErrors.ts"
import { shardGroupOfEntity } from "../../platform/cluster/SessionAddress.ts"
import { ClosedBy } from "./SessionLifecycle.ts"

/** The session has no live runtime here (not started yet, or already ended). */
export class SessionGone extends Schema.TaggedError<SessionGone>()("SessionGone", {}) {}

/**
 * Takes the runtime, then stays in flight until the session ends: an entity
 * with a request in flight is never reaped as idle, so a live session holds
 * its actor without the persisted keep-alive message (three writes to the
 * cluster's message table per session, and a storage read). Its sender does
 * not wait (`discard`) nor bind it (`Uninterruptible: "client"`); the entity's
 * termination (shutdown, a shard moving) interrupts it at once.
 */
const Start = Rpc.make("Start", {
  // The row its create inserted, when the create sends it: the start need not read it again.
  payload: { row: Schema.optionalKey(SessionRow) }
})
  .annotate(ClusterSchema.Uninterruptible, "client")
  .annotate(ClusterSchema.InterruptOnTermination, true)
const Close = Rpc.make("Close", {
  payload: { reason: EndedReason, closedBy: Schema.optionalKey(ClosedBy) },
  success: Schema.Boolean
})
/**
 * The live runtime failed a request, or did not answer it within 30 s: the
 * caller's request fails (500), and the session lives on. Not a defect of the
 * entity's, which would restart it and end the session.
 */
export class RuntimeFailed extends Schema.TaggedError<RuntimeFailed>()("RuntimeFailed", {
  detail: Schema.String
}) {}

const Screenshot = Rpc.make("Screenshot", {
  success: Schema.Uint8Array,
  error: Schema.Union([SessionGone, RuntimeFailed])
})
const Resize = Rpc.make("Resize", {
  payload: { width: Schema.Int, height: Schema.Int },
  error: Schema.Union([SessionGone, RuntimeFailed])
})
/** An action on a browser session's front page (`PageActions`), answered with plain JSON. */
const Drive = Rpc.make("Drive", {
  payload: { action: PageActions.PageAction },
  success: Schema.Json,
  error: Schema.Union([SessionGone, RuntimeFailed, PageActions.PageActionFailed])
})

/** Who asks a session's actor for something done in its name: the owner, and where the request came from (the audit's). */
export const Caller = Schema.Struct({
  owner: OwnerSchema,
  ip: Schema.NullOr(Schema.String),
  userAgent: Schema.NullOr(Schema.String)
})
export type Caller = typeof Caller.Type

/** What a connection to the session may be refused with (`Sessions.connect`'s, for a lease). */
const connectErrors = [
  SessionNotOpen,
  ServiceUnavailable,
  SessionTypeMismatch,
  ConnectionLimitReached
] as const

/** A foreground command's end, or a background one started. */
export const ExecOutcome = Schema.Union([
  Schema.Struct({ background: Schema.Literal(false), result: ExecResult }),
  Schema.Struct({ background: Schema.Literal(true), info: CommandInfo })
])
export type ExecOutcome = typeof ExecOutcome.Type

/**
 * The sandbox calls, answered on the node that runs the session with a
 * lease held while each runs (what a connection holds): a command run,
 * listed, read, written to and signalled, a file read or written whole,
 * a directory listed, a path's entry, made, moved or removed, a directory
 * watched, the self-test. None is bounded in time by the actor (a foreground
 * command runs to its own timeout); each is interrupted with its caller.
 */
const Exec = Rpc.make("Exec", {
  payload: { caller: Caller, input: ExecRequest },
  success: ExecOutcome,
  error: Schema.Union([...connectErrors, InvalidField, ProcessLimitReached, StdinFull])
})
const Commands = Rpc.make("Commands", {
  payload: { caller: Caller },
  success: CommandList,
  error: Schema.Union([...connectErrors])
})
const Command = Rpc.make("Command", {
  payload: { caller: Caller, commandId: Schema.String },
  success: CommandInfo,
  error: Schema.Union([...connectErrors, CommandNotFound])
})
const Stdin = Rpc.make("Stdin", {
  payload: { caller: Caller, commandId: Schema.String, input: StdinRequest },
  success: StdinResult,
  error: Schema.Union([
    ...connectErrors,
    CommandNotFound,
    InvalidField,
    CommandNotRunning,
    StdinClosed,
    StdinFull
  ])
})
const Kill = Rpc.make("Kill", {
  payload: { caller: Caller, commandId: Schema.String, input: KillRequest },
  success: CommandInfo,
  error: Schema.Union([...connectErrors, CommandNotFound, InvalidField, CommandNotRunning])
})
const ReadFile = Rpc.make("ReadFile", {
  payload: { caller: Caller, path: Schema.String },
  success: SandboxFile,
  error: Schema.Union([...connectErrors, InvalidField, FileNotFound, FileTooLarge])
})
const WriteFile = Rpc.make("WriteFile", {
  payload: { caller: Caller, path: Schema.String, content: Schema.Uint8Array },
  success: UploadResult,
  error: Schema.Union([...connectErrors, InvalidField, FileTooLarge, TooManyUploads])
})
/** What a call on the sandbox's file system may be refused with, past the connection's refusals. */
const fileErrors = [InvalidField, FileNotFound, FileExists, DirectoryNotEmpty, WrongFileType] as const
const ListFiles = Rpc.make("ListFiles", {
  payload: {
    caller: Caller,
    path: Schema.String,
    limit: Schema.optionalKey(Schema.Number),
    cursor: Schema.optionalKey(Schema.String)
  },
  success: FileInfoList,
  error: Schema.Union([...connectErrors, ...fileErrors])
})
const StatFile = Rpc.make("StatFile", {
  payload: { caller: Caller, path: Schema.String },
  success: FileInfo,
  error: Schema.Union([...connectErrors, ...fileErrors])
})
const MakeDirectory = Rpc.make("MakeDirectory", {
  payload: { caller: Caller, input: MakeDirectoryRequest },
  success: FileInfo,
  error: Schema.Union([...connectErrors, ...fileErrors])
})
const MoveFile = Rpc.make("MoveFile", {
  payload: { caller: Caller, input: MoveFileRequest },
  success: FileInfo,
  error: Schema.Union([...connectErrors, ...fileErrors])
})
const RemoveFile = Rpc.make("RemoveFile", {
  payload: { caller: Caller, path: Schema.String, recursive: Schema.Boolean },
  error: Schema.Union([...connectErrors, ...fileErrors])
})
const StartWatch = Rpc.make("StartWatch", {
  payload: { caller: Caller, input: FileWatchRequest },
  success: FileWatchInfo,
  error: Schema.Union([...connectErrors, ...fileErrors, TooManyWatches])
})
const Watches = Rpc.make("Watches", {
  payload: { caller: Caller },
  success: FileWatchList,
  error: Schema.Union([...connectErrors])
})
const Watch = Rpc.make("Watch", {
  payload: { caller: Caller, watchId: Schema.String },
  success: FileWatchInfo,
  error: Schema.Union([...connectErrors, WatchNotFound])
})
const StopWatch = Rpc.make("StopWatch", {
  payload: { caller: Caller, watchId: Schema.String },
  error: Schema.Union([...connectErrors, WatchNotFound])
})
/** Holds no connection: never refused for the connection limits. */
const SelfTest = Rpc.make("SelfTest", {
  payload: { caller: Caller },
  success: SelfTestReport,
  error: Schema.Union([SessionNotOpen, ServiceUnavailable, SessionTypeMismatch])
})

/**
 * A session as an actor: it owns a Scope holding the session's runtime (a
 * browser or a sandbox, taken from its kind's warm pool), its TTL timer and
 * its crash watcher. Closing that scope releases all of them, whatever the
 * reason. Nothing here depends on the kind: the runtime says what it is.
 */
export const Session = Entity.make("Session", [
  Start,
  Close,
  Screenshot,
  Resize,
  Drive,
  Exec,
  Commands,
  Command,
  Stdin,
  Kill,
  ReadFile,
  WriteFile,
  ListFiles,
  StatFile,
  MakeDirectory,
  MoveFile,
  RemoveFile,
  StartWatch,
  Watches,
  Watch,
  StopWatch,
  SelfTest
]).annotate(ClusterSchema.ShardGroup, shardGroupOfEntity)
