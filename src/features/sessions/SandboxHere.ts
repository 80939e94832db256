/**
 * The sandbox calls as the session's actor answers them, on the node that
 * runs the session: each holds a connection of the call's kind (a lease, as
 * a client's connection does; the self-test holds none) while it runs, as
 * the caller, with the caller's origin in the audit trail.
 */
import { Effect } from "effect"
import { Audit } from "../audit/Audit.ts"
import { CurrentOrigin } from "../policy/AuthMiddleware.ts"
import type { ExecRequest, KillRequest, StdinRequest } from "../../kernel/Sandbox.ts"
import type { Command } from "../../runtime/Exec.ts"
import * as SelfTest from "../../runtime/SelfTestChecks.ts"
import * as Exec from "./Exec.ts"
import * as Files from "./Files.ts"
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
      selfTest: (caller: Caller) =>
        connected(caller, "check", (connection) => SelfTest.run(id, connection.runtime))
    }
  }
})
