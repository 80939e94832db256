import { Context, Effect, Layer } from "effect"
import type { Principal } from "../domain/Identity.ts"

export interface SessionOwner {
  readonly accountId: string
  /** The key that created the session; null for sessions made through the library. */
  readonly apiKeyId: string | null
}

/** The owner a Bearer key speaks for. */
export const ownerOf = (principal: Principal): SessionOwner => ({
  accountId: principal.accountId,
  apiKeyId: principal.apiKeyId
})

/**
 * The gate in front of session creation: balance checks, rate limits and
 * concurrency caps compose in here as layers. `admit` wraps the insert of the
 * new row, so a cap can reserve its slot in the same transaction.
 */
export class SessionAdmission extends Context.Service<
  SessionAdmission,
  {
    readonly admit: <A, E, R>(owner: SessionOwner, insert: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  }
>()("rbs/sessions/SessionAdmission") {
  /** No limits: every session is admitted. */
  static readonly layerUnlimited = Layer.succeed(
    SessionAdmission,
    SessionAdmission.of({ admit: (_owner, insert) => insert })
  )
}
