import { Clock, Effect, Layer } from "effect"
import { Singleton } from "effect/cluster"
import { ServiceConfig } from "../Config.ts"
import { SessionActors } from "./SessionEntity.ts"
import { SessionsRepo } from "./SessionsRepo.ts"

/**
 * At start, before any request: sessions this node left open when its
 * previous process died have no browser any more. Close them
 * (`server_restart`); their Chromium and profile dirs are reaped by the pool.
 */
export const layerStartup = Layer.effectDiscard(
  Effect.gen(function* () {
    const config = yield* ServiceConfig
    const repo = yield* SessionsRepo
    const at = new Date(yield* Clock.currentTimeMillis)
    const ended = yield* repo.endAllOnNode(config.nodeId, "server_restart", at)
    if (ended.length > 0)
      yield* Effect.logWarning("session.reconciled", { count: ended.length, reason: "server_restart" })
  })
)

/**
 * The backstop for TTLs: each session's own timer closes it on time; this
 * loop, running once across all nodes, closes any open session past its
 * `expires_at` that no timer did (its actor was lost or never started).
 */
export const layerExpiryReaper = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* ServiceConfig
    const repo = yield* SessionsRepo
    const actors = yield* SessionActors
    const sweep = Effect.gen(function* () {
      const expired = yield* repo.expired(new Date(yield* Clock.currentTimeMillis), 100)
      yield* Effect.forEach(expired, (id) => actors.close(id, "ttl_expired"), {
        concurrency: 4,
        discard: true
      })
    })
    const loop = sweep.pipe(
      Effect.catchCause((cause) => Effect.logError("session.reaper_failed", { cause })),
      Effect.andThen(Effect.sleep(config.reaperIntervalMs)),
      Effect.forever
    )
    return Singleton.make("rbs/sessions/ExpiryReaper", loop)
  })
)
