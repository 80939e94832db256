/**
 * The sandbox calls as the session's actor answers them, on the node that
 * runs the session: each holds a connection of the call's kind (a lease, as
 * a client's connection does; the self-test holds none) while it runs, as
 * the caller, with the caller's origin in the audit trail.
 */
import { Effect } from "effect"
import { Audit } from "../audit/Audit.ts"
import { CurrentOrigin } from "../policy/AuthMiddleware.ts"
import type {
  ExecRequest,
  FileWatchRequest,
  KillRequest,
  MakeDirectoryRequest,
  MoveFileRequest,
  StdinRequest
} from "../../kernel/Sandbox.ts"
import type { Command } from "../../runtime/Exec.ts"
import * as SelfTest from "../../runtime/SelfTestChecks.ts"
import * as Exec from "./Exec.ts"
import * as Files from "./Files.ts"
import * as FileSystem from "./FileSystem.ts"
import * as FileWatches from "./FileWatches.ts"
import type { ConnectionKind, RuntimeFor, SessionConnection } from "./SessionConnections.ts"
import type { Caller } from "./SessionRpcs.ts"
import { Sessions } from "./Sessions.ts"

/** The handlers of session `id`'s sandbox calls. */
export const make = Effect.gen(function* () {
  const sessions = yield* Sessions
  const audit = yield* Audit
  return (id: string) => {
    /** `f` with a connection of `kind` held for it, as `caller`. */
    const connected = <K extends ConnectionKind, A, E>(
      caller: Caller,
      kind: K,
      f: (connection: SessionConnection<RuntimeFor<K>>) => Effect.Effect<A, E>
    ) =>
      Effect.scoped(Effect.flatMap(sessions.connectLocated(caller.owner, id, kind), f)).pipe(
        Effect.provideService(CurrentOrigin, { ip: caller.ip, userAgent: caller.userAgent })
      )

    /** The success of a change to the sandbox's files, in the caller's name. */
    const recorded = (caller: Caller, action: string, details: Record<string, unknown>) =>
      audit.record(caller.owner, { action, targetType: "session", targetId: id, details })

    const withCommand = <A, E>(
      caller: Caller,
      commandId: string,
      f: (connection: SessionConnection<RuntimeFor<"sandbox">>, command: Command) => Effect.Effect<A, E>
    ) =>
      connected(caller, "sandbox", (connection) =>
        Effect.flatMap(Exec.find(connection.runtime.exec.commands, commandId), (command) =>
          f(connection, command)
        )
      )

    return {
      exec: (caller: Caller, input: ExecRequest) =>
        connected(caller, "sandbox", (connection) =>
          Effect.map(Exec.execute(audit, id, connection.runtime, caller.owner, input), (outcome) =>
            outcome.background
              ? { background: true as const, info: outcome.info }
              : { background: false as const, result: outcome.result }
          )
        ),
      commands: (caller: Caller) =>
        connected(caller, "sandbox", (connection) =>
          Effect.succeed({
            object: "list" as const,
            data: connection.runtime.exec.commands.list().map((each) => Exec.infoOf(id, each))
          })
        ),
      command: (caller: Caller, commandId: string) =>
        withCommand(caller, commandId, (_connection, command) => Effect.succeed(Exec.infoOf(id, command))),
      stdin: (caller: Caller, commandId: string, input: StdinRequest) =>
        withCommand(caller, commandId, (connection, command) =>
          Exec.writeStdin(connection.runtime.exec.commands, command, input)
        ),
      kill: (caller: Caller, commandId: string, input: KillRequest) =>
        withCommand(caller, commandId, (_connection, command) =>
          Effect.map(Exec.kill(command, input), (killed) => Exec.infoOf(id, killed))
        ),
      readFile: (caller: Caller, path: string) =>
        connected(caller, "sandbox", (connection) => Files.readWhole(connection.runtime, path)),
      writeFile: (caller: Caller, path: string, content: Uint8Array) =>
        connected(caller, "sandbox", (connection) => Files.writeWhole(connection.runtime, path, content)),
      listFiles: (caller: Caller, path: string, limit: number | undefined, cursor: string | undefined) =>
        connected(caller, "sandbox", (connection) =>
          FileSystem.list(connection.runtime, path, limit, cursor)
        ),
      statFile: (caller: Caller, path: string) =>
        connected(caller, "sandbox", (connection) => FileSystem.stat(connection.runtime, path)),
      makeDirectory: (caller: Caller, input: MakeDirectoryRequest) =>
        connected(caller, "sandbox", (connection) =>
          FileSystem.mkdir(connection.runtime, input.path, input.parents ?? false).pipe(
            Effect.tap((made) => recorded(caller, "file.directory_created", { path: made.path }))
          )
        ),
      moveFile: (caller: Caller, input: MoveFileRequest) =>
        connected(caller, "sandbox", (connection) =>
          FileSystem.move(connection.runtime, input.from, input.to, input.overwrite ?? false).pipe(
            Effect.tap((moved) => recorded(caller, "file.moved", { from: input.from, to: moved.path }))
          )
        ),
      removeFile: (caller: Caller, path: string, recursive: boolean) =>
        connected(caller, "sandbox", (connection) =>
          FileSystem.remove(connection.runtime, path, recursive).pipe(
            Effect.flatMap((removed) => recorded(caller, "file.removed", { path: removed, recursive }))
          )
        ),
      startWatch: (caller: Caller, input: FileWatchRequest) =>
        connected(caller, "sandbox", (connection) =>
          FileWatches.start(connection.runtime, input.path, input.recursive ?? false).pipe(
            Effect.map((watch) => FileWatches.infoOf(id, watch)),
            Effect.tap((watch) =>
              recorded(caller, "file_watch.created", { watch_id: watch.id, path: watch.path })
            )
          )
        ),
      watches: (caller: Caller) =>
        connected(caller, "sandbox", (connection) =>
          Effect.succeed({
            object: "list" as const,
            data: connection.runtime.exec.watches.list().map((watch) => FileWatches.infoOf(id, watch))
          })
        ),
      watch: (caller: Caller, watchId: string) =>
        connected(caller, "sandbox", (connection) =>
          Effect.map(FileWatches.find(connection.runtime.exec.watches, watchId), (watch) =>
            FileWatches.infoOf(id, watch)
          )
        ),
      stopWatch: (caller: Caller, watchId: string) =>
        connected(caller, "sandbox", (connection) =>
          Effect.flatMap(FileWatches.find(connection.runtime.exec.watches, watchId), (watch) => {
            connection.runtime.exec.watches.stop(watch.id)
            return recorded(caller, "file_watch.deleted", { watch_id: watch.id, path: watch.path })
          })
        ),
      selfTest: (caller: Caller) =>
        connected(caller, "check", (connection) => SelfTest.run(id, connection.runtime))
    }
  }
})
