import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { ResourceLimitReached } from "../../kernel/Errors.ts"
import type { LimitSettings } from "../../platform/config/ConfigInput.ts"
import * as Sql from "../../platform/db/Sql.ts"
import { countRejection } from "./LimitMetrics.ts"
import { LimitsConfig } from "./LimitsConfig.ts"

/** What an account keeps only so many of. */
export type BoundedResource = "webhooks" | "api_keys" | "workspaces" | "jobs" | "images"

/** Each bound: its setting, and how a refusal names the objects and what frees one. */
const BOUNDS: Record<
  BoundedResource,
  { readonly setting: keyof LimitSettings; readonly noun: string; readonly remedy: string }
> = {
  webhooks: { setting: "webhooksPerAccount", noun: "webhooks", remedy: "delete one first" },
  api_keys: { setting: "keysPerAccount", noun: "live API keys", remedy: "revoke one first" },
  workspaces: { setting: "workspacesPerAccount", noun: "workspaces", remedy: "delete one first" },
  jobs: {
    setting: "jobsPerAccount",
    noun: "jobs",
    remedy: "finished ones are deleted after their retention"
  },
  images: { setting: "imagesPerAccount", noun: "images", remedy: "delete one first" }
}

/** The first key of the bounds' advisory locks ("rbs" 3: placement's is 1, the job claim's 2). */
const BOUND_LOCK = 0x72627303

/**
 * The objects an account keeps, capped race-free: a transaction lock of the
 * account's objects of that kind is taken first (an advisory lock, so a bound
 * queues behind no other work on the account, and a feature that cannot reach
 * identity's account row needs none), so concurrent creates of one account
 * take turns on every node sharing the database; the owner's count, a
 * statement read after the lock was granted, stays true until the new row is
 * in. Must run inside the transaction that inserts, before the insert.
 */
export class AccountBounds extends Context.Service<
  AccountBounds,
  {
    /**
     * Refuses the create (409 `resource_limit`) when `count` (the owning module's query of what the
     * account holds) is at the cap; `remedy` says what frees a slot when the bound's own does not fit.
     */
    readonly reserve: (
      resource: BoundedResource,
      accountId: string,
      count: Effect.Effect<number>,
      remedy?: string
    ) => Effect.Effect<void, ResourceLimitReached>
  }
>()("rbs/limits/AccountBounds") {
  static readonly layer = Layer.effect(
    AccountBounds,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const limits = yield* LimitsConfig

      const reserve = Effect.fnUntraced(function* (
        resource: BoundedResource,
        accountId: string,
        count: Effect.Effect<number>,
        remedy?: string
      ) {
        // Outside a transaction the lock would end with its own statement: the count would guard nothing.
        if (Option.isNone(yield* Effect.serviceOption(sql.transactionService)))
          return yield* Effect.die(new Error(`AccountBounds.reserve(${resource}) outside a transaction`))
        yield* sql`SELECT pg_advisory_xact_lock(${BOUND_LOCK}, hashtext(${`${resource}:${accountId}`}))`.pipe(
          Sql.orDefect
        )
        const bound = BOUNDS[resource]
        const limit = limits[bound.setting]
        if ((yield* count) < limit) return
        yield* countRejection(`${resource}_per_account`)
        return yield* new ResourceLimitReached({
          resource: bound.noun,
          limit,
          remedy: remedy ?? bound.remedy
        })
      })

      return AccountBounds.of({ reserve })
    })
  )
}
