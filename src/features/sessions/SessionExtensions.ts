import { Context, type Effect } from "effect"

/**
 * The extensions a browser session loads (`extensions` at create), as
 * sessions need them: the extensions feature implements it
 * (`ExtensionSessions`), the composition root wires it.
 */
export class SessionExtensions extends Context.Service<
  SessionExtensions,
  {
    /** Those of `ids` the account has. */
    readonly owned: (accountId: string, ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>>
    /** Each unpacked on this node, read-only, in the order given; one deleted since the create fails the launch. */
    readonly unpacked: (
      accountId: string,
      ids: ReadonlyArray<string>
    ) => Effect.Effect<ReadonlyArray<string>, Error>
  }
>()("rbs/sessions/SessionExtensions") {}
