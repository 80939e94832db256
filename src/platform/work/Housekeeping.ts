import { type Duration, Effect } from "effect"

/** How a housekeeping task reports a round: its log name, and what it removed as log fields. */
export interface Chore {
  /** `<name>.purged` when it removed something, `<name>.purge_failed` when it failed. */
  readonly name: string
  readonly interval: Duration.Input
  /** The log fields of a round that removed `count` things, e.g. `{ events: count }`. */
  readonly removed: (count: number) => Record<string, unknown>
  /** A round's level: `Info` by default; `Debug` for chores too frequent to be news. */
  readonly level?: "Info" | "Debug"
  /** A failed round's level: `Warning` by default. */
  readonly failure?: "Warning" | "Error"
}

/**
 * A housekeeping task (a retention purge) run every `interval`, the first
 * round at once, for as long as it runs: a round that removed something is
 * logged, a failed one is logged and the next round comes all the same. The
 * caller forks it (`Effect.forkScoped`, or a cluster singleton).
 */
export const every = <R>(
  chore: Chore,
  task: Effect.Effect<number, unknown, R>
): Effect.Effect<never, never, R> =>
  task.pipe(
    Effect.tap((count) =>
      count > 0
        ? (chore.level === "Debug" ? Effect.logDebug : Effect.logInfo)(
            `${chore.name}.purged`,
            chore.removed(count)
          )
        : Effect.void
    ),
    Effect.catchCause((cause) =>
      (chore.failure === "Error" ? Effect.logError : Effect.logWarning)(`${chore.name}.purge_failed`, {
        cause
      })
    ),
    Effect.andThen(Effect.sleep(chore.interval)),
    Effect.forever
  )
