import { Context, Effect, Layer, Schema } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { InvalidField, InvalidRequest } from "../../kernel/Errors.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { ExecResult, RunRequest } from "../../kernel/Sandbox.ts"
import { CreateSessionRequest } from "../../kernel/Session.ts"
import { decodeInput } from "../../kernel/Validation.ts"
import { Audit } from "../../features/audit/Audit.ts"
import { SessionDoor } from "../live/SessionDoor.ts"
import { Sessions } from "../../features/sessions/Sessions.ts"
import * as Exec from "../../features/sessions/Exec.ts"

const decodeRun = decodeInput(RunRequest)
// The session's fields, as `POST /v1/sessions` checks them (a region's name has its own pattern there).
const decodeSession = decodeInput(CreateSessionRequest)

const make = Effect.gen(function* () {
  const sessions = yield* Sessions
  const door = yield* SessionDoor
  const audit = yield* Audit
  const run = (owner: Owner, request: HttpServerRequest.HttpServerRequest) =>
    Effect.gen(function* () {
      const text = yield* request.text.pipe(Effect.mapError(() => new InvalidRequest()))
      const raw = yield* Effect.try({
        try: (): unknown => JSON.parse(text),
        catch: () => new InvalidRequest()
      })
      const input = yield* decodeRun(raw)
      if (input.background === true) return yield* new InvalidField({ field: "background" })
      const { image, region, ttl_seconds, ...exec } = input
      const session = yield* decodeSession({
        session_type: "sandbox",
        ...(image === undefined ? {} : { image }),
        ...(region === undefined ? {} : { region }),
        ...(ttl_seconds === undefined ? {} : { ttl_seconds })
      })
      const created = yield* sessions.create(owner, session).pipe(
        // No workspace is asked for: none of its refusals can come.
        Effect.catchTag(["WorkspaceNotFound", "WorkspaceConflict", "StorageLimitReached"], Effect.die)
      )
      const id = created.id
      return yield* door
        .serve(
          request,
          {
            owner,
            id,
            kind: "sandbox",
            params: { id },
            path: `/v1/sessions/${id}/exec`,
            body: new TextEncoder().encode(JSON.stringify(exec))
          },
          (_request, connection, caller) =>
            Effect.gen(function* () {
              const outcome = yield* Exec.execute(audit, id, connection.runtime, caller, exec)
              if (outcome.background) return yield* new InvalidField({ field: "background" })
              return HttpServerResponse.jsonUnsafe(Schema.encodeSync(ExecResult)(outcome.result))
            })
        )
        .pipe(Effect.ensuring(sessions.close(owner, id).pipe(Effect.ignore)))
    })
  return { run }
})

/**
 * `POST /v1/exec`: a sandbox session for one command. The session is
 * created as `POST /v1/sessions` creates one (balance, limits, placement,
 * billing), the command runs through the session door on whichever node got
 * it, and the session ends (`client_delete`) once the command has, whatever
 * became of it.
 */
export class RunOnce extends Context.Service<RunOnce, Effect.Success<typeof make>>()("rbs/sandbox/RunOnce") {
  static readonly layer = Layer.effect(RunOnce, make)
}
