import { Context, Effect, Layer } from "effect"
import { InvalidField } from "../../kernel/Errors.ts"
import type { Owner } from "../../kernel/Owner.ts"
import type {
  ExecRequest,
  FileWatchRequest,
  KillRequest,
  MakeDirectoryRequest,
  MoveFileRequest,
  RunRequest,
  StdinRequest
} from "../../kernel/Sandbox.ts"
import { CreateSessionRequest } from "../../kernel/Session.ts"
import { decodeInput } from "../../kernel/Validation.ts"
import { CurrentOrigin } from "../policy/AuthMiddleware.ts"
import type { ConnectionKind } from "./SessionConnections.ts"
import { SessionActors, type SessionClient } from "./SessionActors.ts"
import type { Caller } from "./SessionRpcs.ts"
import { Sessions } from "./Sessions.ts"

// The session's fields of a run, as `POST /v1/sessions` checks them (a region's name has its own pattern there).
const decodeSession = decodeInput(CreateSessionRequest)

const make = Effect.gen(function* () {
  const sessions = yield* Sessions
  const actors = yield* SessionActors

  /** `call` of the owner's session's actor, where the session runs, once its row allows a call of `kind`. */
  const toActor = <A, E>(
    owner: Owner,
    id: string,
    kind: ConnectionKind,
    call: (client: SessionClient, caller: Caller) => Effect.Effect<A, E>
  ) =>
    Effect.gen(function* () {
      const address = yield* sessions.actorFor(owner, id, kind)
      const origin = yield* CurrentOrigin
      const caller: Caller = { owner, ip: origin.ip, userAgent: origin.userAgent }
      return yield* actors.sandbox(address, (client) => call(client, caller))
    })

  const exec = Effect.fn("SandboxCalls.exec")(function* (owner: Owner, id: string, input: ExecRequest) {
    return yield* toActor(owner, id, "sandbox", (client, caller) => client.Exec({ caller, input }))
  })

  return {
    exec,
    commands: Effect.fn("SandboxCalls.commands")(function* (owner: Owner, id: string) {
      return yield* toActor(owner, id, "sandbox", (client, caller) => client.Commands({ caller }))
    }),
    command: Effect.fn("SandboxCalls.command")(function* (owner: Owner, id: string, commandId: string) {
      return yield* toActor(owner, id, "sandbox", (client, caller) => client.Command({ caller, commandId }))
    }),
    stdin: Effect.fn("SandboxCalls.stdin")(function* (
      owner: Owner,
      id: string,
      commandId: string,
      input: StdinRequest
    ) {
      return yield* toActor(owner, id, "sandbox", (client, caller) =>
        client.Stdin({ caller, commandId, input })
      )
    }),
    kill: Effect.fn("SandboxCalls.kill")(function* (
      owner: Owner,
      id: string,
      commandId: string,
      input: KillRequest
    ) {
      return yield* toActor(owner, id, "sandbox", (client, caller) =>
        client.Kill({ caller, commandId, input })
      )
    }),
    readFile: Effect.fn("SandboxCalls.readFile")(function* (owner: Owner, id: string, path: string) {
      return yield* toActor(owner, id, "sandbox", (client, caller) => client.ReadFile({ caller, path }))
    }),
    writeFile: Effect.fn("SandboxCalls.writeFile")(function* (
      owner: Owner,
      id: string,
      path: string,
      content: Uint8Array
    ) {
      return yield* toActor(owner, id, "sandbox", (client, caller) =>
        client.WriteFile({ caller, path, content })
      )
    }),
    listFiles: Effect.fn("SandboxCalls.listFiles")(function* (
      owner: Owner,
      id: string,
      path: string,
      page: { readonly limit?: number | undefined; readonly cursor?: string | undefined } = {}
    ) {
      return yield* toActor(owner, id, "sandbox", (client, caller) =>
        client.ListFiles({
          caller,
          path,
          ...(page.limit === undefined ? {} : { limit: page.limit }),
          ...(page.cursor === undefined ? {} : { cursor: page.cursor })
        })
      )
    }),
    statFile: Effect.fn("SandboxCalls.statFile")(function* (owner: Owner, id: string, path: string) {
      return yield* toActor(owner, id, "sandbox", (client, caller) => client.StatFile({ caller, path }))
    }),
    makeDirectory: Effect.fn("SandboxCalls.makeDirectory")(function* (
      owner: Owner,
      id: string,
      input: MakeDirectoryRequest
    ) {
      return yield* toActor(owner, id, "sandbox", (client, caller) => client.MakeDirectory({ caller, input }))
    }),
    moveFile: Effect.fn("SandboxCalls.moveFile")(function* (
      owner: Owner,
      id: string,
      input: MoveFileRequest
    ) {
      return yield* toActor(owner, id, "sandbox", (client, caller) => client.MoveFile({ caller, input }))
    }),
    removeFile: Effect.fn("SandboxCalls.removeFile")(function* (
      owner: Owner,
      id: string,
      path: string,
      recursive: boolean
    ) {
      return yield* toActor(owner, id, "sandbox", (client, caller) =>
        client.RemoveFile({ caller, path, recursive })
      )
    }),
    startWatch: Effect.fn("SandboxCalls.startWatch")(function* (
      owner: Owner,
      id: string,
      input: FileWatchRequest
    ) {
      return yield* toActor(owner, id, "sandbox", (client, caller) => client.StartWatch({ caller, input }))
    }),
    watches: Effect.fn("SandboxCalls.watches")(function* (owner: Owner, id: string) {
      return yield* toActor(owner, id, "sandbox", (client, caller) => client.Watches({ caller }))
    }),
    watch: Effect.fn("SandboxCalls.watch")(function* (owner: Owner, id: string, watchId: string) {
      return yield* toActor(owner, id, "sandbox", (client, caller) => client.Watch({ caller, watchId }))
    }),
    stopWatch: Effect.fn("SandboxCalls.stopWatch")(function* (owner: Owner, id: string, watchId: string) {
      return yield* toActor(owner, id, "sandbox", (client, caller) => client.StopWatch({ caller, watchId }))
    }),
    selfTest: Effect.fn("SandboxCalls.selfTest")(function* (owner: Owner, id: string) {
      return yield* toActor(owner, id, "check", (client, caller) => client.SelfTest({ caller }))
    }),
    /**
     * A sandbox session for one foreground command: created as `POST
     * /v1/sessions` creates one (balance, limits, placement, billing), the
     * command run where the session runs, and the session ended
     * (`client_delete`) once the command has, whatever became of it.
     */
    run: Effect.fn("SandboxCalls.run")(function* (owner: Owner, input: RunRequest) {
      if (input.background === true) return yield* new InvalidField({ field: "background" })
      const { image, region, ttl_seconds, resources, ...command } = input
      const session = yield* decodeSession({
        session_type: "sandbox",
        ...(image === undefined ? {} : { image }),
        ...(region === undefined ? {} : { region }),
        ...(ttl_seconds === undefined ? {} : { ttl_seconds }),
        ...(resources === undefined ? {} : { resources })
      })
      const created = yield* sessions.create(owner, session).pipe(
        // No workspace is asked for: none of its refusals can come.
        Effect.catchTag(["WorkspaceNotFound", "WorkspaceConflict", "StorageLimitReached"], Effect.die)
      )
      const outcome = yield* exec(owner, created.id, command).pipe(
        Effect.ensuring(sessions.close(owner, created.id).pipe(Effect.ignore))
      )
      // Asked for in the foreground: the command's end.
      if (outcome.background)
        return yield* Effect.die(new Error("a foreground run answered in the background"))
      return outcome.result
    })
  }
})

/**
 * The calls of a sandbox session, with or without HTTP: a command run (in
 * the foreground, or in the background and then listed, read, written to and
 * signalled), a file read or written whole (16 MiB), a directory listed,
 * a path's entry, made, moved or removed, a directory watched (its changes
 * are a stream: `FileWatches.events` through the door), the self-test, and a
 * one-command run in a sandbox of its own. Each is answered by the session's
 * actor on the node that runs it (an entity call), holding a lease while it
 * runs; a library host calls these with the owner it has authenticated.
 */
export class SandboxCalls extends Context.Service<SandboxCalls, Effect.Success<typeof make>>()(
  "rbs/sessions/SandboxCalls"
) {
  static readonly layer = Layer.effect(SandboxCalls, make)
}
