import { Context, Effect, Layer, Queue } from "effect"
import * as Wake from "../../platform/work/Wake.ts"

/**
 * The channel a change to what a key may do notifies (`sql/0017_auth_notify.sql`:
 * triggers on `api_keys`, `service_accounts` and `account_members`, sent by
 * Postgres on commit to every node).
 */
export const AUTH_CHANNEL = "rbs_auth"

/** An entry lives at most this long, whatever else happens (wall clock). */
export const KEY_CACHE_TTL_MS = 10_000

/** More keys than this are not kept: the cache is for a client's run of requests, not a table copy. */
const MAX_ENTRIES = 10_000

/**
 * Keys that authenticated, kept on each node for a few seconds, so that a
 * client's run of requests (create, connect, screenshot, delete) reads its key
 * once instead of once each. Every change that could end or narrow a key's
 * authority (its revocation or rotation, its scopes, its service account's
 * role or deletion, its creator's membership) fires a trigger whose `NOTIFY`
 * reaches every node at the change's commit: each clears all it holds. The
 * node that made the change has cleared already when its answer leaves
 * (`clear` after the transaction), so its client never meets the old key.
 *
 * A read that began before a clear is not kept (the generation moved), so a
 * lookup racing a revocation cannot put the old row back. While no connection
 * listens (Postgres restarting, another SQL client), nothing is kept or
 * served; listening again clears everything (changes meanwhile notified no one).
 */
export class KeyCache extends Context.Service<
  KeyCache,
  {
    /** What `read` answers for `key`: from the cache while fresh, else read (and kept when it may be). */
    readonly through: <A, E, R>(
      key: string,
      read: Effect.Effect<A, E, R>,
      keep: (value: A) => boolean
    ) => Effect.Effect<A, E, R>
    readonly clear: Effect.Effect<void>
  }
>()("rbs/auth/KeyCache") {
  static readonly layer = Layer.effect(
    KeyCache,
    Effect.gen(function* () {
      const entries = new Map<string, { readonly value: unknown; readonly at: number }>()
      let generation = 0
      const clearNow = () => {
        generation++
        entries.clear()
      }
      const wake = yield* Queue.unbounded<void>()
      const listener = yield* Wake.listen(AUTH_CHANNEL, wake)
      // Each notification, and each (re)start of listening, clears all.
      yield* Queue.take(wake).pipe(Effect.andThen(Effect.sync(clearNow)), Effect.forever, Effect.forkScoped)

      const through = <A, E, R>(key: string, read: Effect.Effect<A, E, R>, keep: (value: A) => boolean) =>
        Effect.suspend(() => {
          if (!listener.listening()) return read
          const hit = entries.get(key)
          if (hit !== undefined && performance.now() - hit.at < KEY_CACHE_TTL_MS)
            return Effect.succeed(hit.value as A)
          const from = generation
          return Effect.tap(read, (value) =>
            Effect.sync(() => {
              if (generation !== from || !listener.listening() || !keep(value)) return
              if (entries.size >= MAX_ENTRIES) entries.clear()
              entries.set(key, { value, at: performance.now() })
            })
          )
        })

      return KeyCache.of({ through, clear: Effect.sync(clearNow) })
    })
  )
}
