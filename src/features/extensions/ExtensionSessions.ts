import { Effect, Layer } from "effect"
import { SessionExtensions } from "../sessions/SessionExtensions.ts"
import { Extensions } from "./Extensions.ts"

/** The account's extensions as sessions load them. */
export const layer = Layer.effect(
  SessionExtensions,
  Effect.map(Extensions, (extensions) =>
    SessionExtensions.of({
      owned: extensions.owned,
      unpacked: (accountId, ids) =>
        extensions
          .unpacked(accountId, ids)
          .pipe(Effect.mapError(() => new Error("an extension of the session was deleted since its create")))
    })
  )
)
