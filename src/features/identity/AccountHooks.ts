import { Context, Effect, Layer } from "effect"

/** Runs inside the transaction that creates the account; its failure rolls the account back. */
export type AccountHook = (account: { readonly id: string; readonly createdAt: Date }) => Effect.Effect<void>

/**
 * What features add to a new account (billing's signup credit), composed as
 * layers over `AccountHooks.layerNone` like `SessionHooks`.
 */
export class AccountHooks extends Context.Service<
  AccountHooks,
  { readonly created: ReadonlyArray<AccountHook> }
>()("rbs/auth/AccountHooks") {
  static readonly layerNone = Layer.succeed(AccountHooks, AccountHooks.of({ created: [] }))

  static readonly add = <E, R>(make: Effect.Effect<AccountHook, E, R>) =>
    Layer.effect(
      AccountHooks,
      Effect.gen(function* () {
        const below = yield* AccountHooks
        const hook = yield* make
        return AccountHooks.of({ created: [...below.created, hook] })
      })
    )
}
