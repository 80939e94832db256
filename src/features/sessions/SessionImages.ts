import { Context, type Effect, type Option } from "effect"

/** An account's image as this node's sandbox runtime takes it: an OCI layout here, and its ref in it. */
export interface LocalImage {
  readonly dir: string
  readonly ref: string
}

/**
 * The images an account pulled through the API (`image` at create), as
 * sessions need them: the images feature implements it (`ImageSessions`), the
 * composition root wires it. An account's image of a name shadows the node's
 * image of that name, for that account's sessions alone; a session that runs
 * one records its id (`image_id`), so its launch finds that very image.
 */
export class SessionImages extends Context.Service<
  SessionImages,
  {
    /** The account's image of that name, if it has one, and whether it is ready. */
    readonly find: (
      accountId: string,
      name: string
    ) => Effect.Effect<
      Option.Option<{ readonly id: string; readonly status: "pulling" | "ready" | "failed" }>
    >
    /** The account's image `id` on this node (fetched from the blob store the first time); one deleted since the create fails the launch. */
    readonly local: (accountId: string, id: string) => Effect.Effect<LocalImage, Error>
  }
>()("rbs/sessions/SessionImages") {}
