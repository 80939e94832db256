import { Effect } from "effect"
import { Audit } from "../audit/Audit.ts"
import { CurrentOrigin } from "../policy/AuthMiddleware.ts"
import { InvalidField, InvalidRequest } from "../../kernel/Errors.ts"
import { isSessionId } from "../../kernel/Ids.ts"
import type { Owner } from "../../kernel/Owner.ts"
import type { BulkTerminateRequest } from "../../kernel/Sandbox.ts"
import { SessionActors } from "./SessionActors.ts"
import { SessionsRepo } from "./SessionsRepo.ts"
import { SessionKinds } from "../../runtime/SessionKinds.ts"

/**
 * `POST /v1/sessions/bulk-terminate`: ends the named open sessions of the
 * active account (`ids`), or all of them (`all: true`), of one kind when
 * `session_type` says so, each through its actor as a DELETE would end it
 * (`ended_reason` `bulk_terminate`, billed once, its own `session.deleted`
 * audit event). Ids that are no open session of the account (unknown,
 * another account's, already ended, of the other kind) are answered as
 * `skipped`, never as an error: the call is safe to repeat.
 */
export const make = Effect.gen(function* () {
  const repo = yield* SessionsRepo
  const actors = yield* SessionActors
  const audit = yield* Audit
  const kinds = yield* SessionKinds

  return Effect.fn("Sessions.bulkTerminate")(function* (owner: Owner, input: BulkTerminateRequest) {
    if (input.session_type !== undefined && !kinds.hasType(input.session_type))
      return yield* new InvalidField({ field: "session_type" })
    if ((input.ids === undefined) === (input.all !== true)) return yield* new InvalidRequest()
    const open = new Map(
      Array.from(yield* repo.openOfAccount(owner.accountId, input.session_type), (address) => [
        address.id,
        address
      ])
    )
    const asked = input.ids === undefined ? [...open.keys()] : [...new Set(input.ids)]
    const origin = yield* CurrentOrigin
    const closedBy = { owner, ip: origin.ip, userAgent: origin.userAgent }
    const ended = yield* Effect.forEach(
      asked,
      (id) => {
        const address = isSessionId(id) ? open.get(id) : undefined
        return address !== undefined
          ? Effect.map(actors.close(address, "bulk_terminate", closedBy), (closed) =>
              closed ? id : undefined
            )
          : Effect.succeed(undefined)
      },
      { concurrency: 8 }
    )
    const terminated = asked.filter((id, index) => ended[index] === id)
    const skipped = asked.filter((id, index) => ended[index] !== id)
    yield* audit.record(owner, {
      action: "session.bulk_terminated",
      targetType: "session",
      targetId: null,
      details: {
        terminated: terminated.length,
        skipped: skipped.length,
        session_type: input.session_type ?? null
      }
    })
    return { terminated, skipped, ended_reason: "bulk_terminate" as const }
  })
})
