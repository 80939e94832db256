import { SqlClient } from "effect/sql"
import { Effect, Layer, Context, Schema } from "effect"
import type { ConcurrencyLimitReached, PaymentRequired, RateLimited } from "../../kernel/Errors.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { AccountsRepo } from "../identity/AccountsRepo.ts"
import { ConcurrencySlots } from "../limits/ConcurrencySlots.ts"
import { RateLimits } from "../limits/RateLimits.ts"
import * as Sql from "../../platform/db/Sql.ts"

/** Why a new session was refused. */
export type AdmissionRefused = PaymentRequired | RateLimited | ConcurrencyLimitReached

/**
 * The balance an account needs to start a session. Billing provides the real
 * check; `layerUnmetered` admits everyone (a host that does not bill).
 */
export class BalanceGate extends Context.Service<
  BalanceGate,
  {
    /**
     * Runs first inside the admission transaction, and leaves the owner's
     * account row locked (`FOR UPDATE`) until it ends (billing then locks its
     * balance row too, and reads the balance with that lock): the concurrency
     * slot counts the account's open sessions under the account row's lock.
     */
    readonly check: (owner: Owner) => Effect.Effect<void, PaymentRequired>
  }
>()("rbs/sessions/BalanceGate") {
  static readonly layerUnmetered = Layer.effect(
    BalanceGate,
    Effect.gen(function* () {
      const accounts = yield* AccountsRepo
      return BalanceGate.of({ check: (owner) => accounts.lock(owner.accountId) })
    })
  )
}

/** Rolls back a transaction that only looked. */
class LookedOnly extends Schema.TaggedError<LookedOnly>()("LookedOnly", {}) {}

/**
 * The gate in front of session creation, composed from small services: the
 * creation rate limit (per account), then, in one transaction with the
 * insert, the balance check and a concurrency slot. A refusal rolls the
 * transaction back, so no row is written for a refused session.
 */
export class SessionAdmission extends Context.Service<
  SessionAdmission,
  {
    readonly admit: <A, E, R>(
      owner: Owner,
      insert: Effect.Effect<A, E, R>
    ) => Effect.Effect<A, E | AdmissionRefused, R>
    /** Reports the owner's creation budget (for the headers) without spending any: a replayed answer. */
    readonly describe: (owner: Owner) => Effect.Effect<void>
    /**
     * The refusals that are the owner's own (balance, concurrency), checked
     * without spending or writing anything: a create the service cannot place
     * anyway answers these first, since waiting would not cure them.
     */
    readonly ownRefusal: (owner: Owner) => Effect.Effect<void, PaymentRequired | ConcurrencyLimitReached>
  }
>()("rbs/sessions/SessionAdmission") {
  static readonly layerNoDeps = Layer.effect(
    SessionAdmission,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rateLimits = yield* RateLimits
      const balance = yield* BalanceGate
      const slots = yield* ConcurrencySlots
      return SessionAdmission.of({
        describe: (owner) => rateLimits.peek("session_create", owner.accountId),
        ownRefusal: (owner) =>
          sql
            .withTransaction(
              balance
                .check(owner)
                .pipe(
                  Effect.andThen(slots.reserve(owner.accountId)),
                  Effect.andThen(Effect.fail(new LookedOnly()))
                )
            )
            .pipe(
              Effect.catchTag("LookedOnly", () => Effect.void),
              Sql.sqlErrorOrDefect
            ),
        admit: (owner, insert) =>
          rateLimits
            .consume("session_create", owner.accountId)
            .pipe(
              Effect.andThen(
                sql.withTransaction(
                  balance
                    .check(owner)
                    .pipe(Effect.andThen(slots.reserve(owner.accountId)), Effect.andThen(insert))
                )
              ),
              Sql.sqlErrorOrDefect
            )
      })
    })
  )

  /** No limits: every session is admitted (still in one transaction with its insert). */
  static readonly layerUnlimited = Layer.effect(
    SessionAdmission,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return SessionAdmission.of({
        describe: () => Effect.void,
        ownRefusal: () => Effect.void,
        admit: (_owner, insert) => Sql.sqlErrorOrDefect(sql.withTransaction(insert))
      })
    })
  )
}
