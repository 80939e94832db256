import { Effect, Layer } from "effect"
import { SessionImages } from "../sessions/SessionImages.ts"
import { AccountImages } from "./AccountImages.ts"

/** The account's images as sandbox sessions run them. */
export const layer = Layer.effect(
  SessionImages,
  Effect.map(AccountImages, (images) =>
    SessionImages.of({
      find: images.find,
      local: (accountId, id) =>
        images
          .local(accountId, id)
          .pipe(Effect.mapError(() => new Error("the session's image was deleted since its create")))
    })
  )
)
