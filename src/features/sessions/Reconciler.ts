import { Clock, Effect, Layer } from "effect"
import { Singleton } from "effect/cluster"
import { NodeConfig } from "../../platform/config/Config.ts"
import { SessionsConfig } from "./SessionsConfig.ts"
import { SessionActors } from "./SessionActors.ts"
import { SessionLifecycle } from "./SessionLifecycle.ts"
import { SessionsRepo } from "./SessionsRepo.ts"

/**
 * At start, before any request: sessions this node left open when its
 * previous process died have no browser any more. Each is closed
 * (`server_restart`) through the lifecycle door, so it is billed for what its
 * proxy last flushed; their Chromium and profile dirs are reaped by the pool.
 */
export const layerStartup = Layer.effectDiscard(
  Effect.gen(function* () {
    const config = yield* NodeConfig
    const repo = yield* SessionsRepo
    const lifecycle = yield* SessionLifecycle
    const open = yield* repo.openOnNode(config.nodeId)
    const at = new Date(yield* Clock.currentTimeMillis)
    yield* Effect.forEach(
      open,
      (id) => lifecycle.recordEnded(id, { status: "closed", reason: "server_restart", at }),
      { discard: true }
    )
    if (open.length > 0)
      yield* Effect.logWarning("session.reconciled", { count: open.length, reason: "server_restart" })
  })
)

/** How long a session may stay `creating` before the reaper starts it again. */
export const STUCK_CREATING_MS = 60_000

/**
 * The backstop for TTLs: each session's own timer closes it on time; this
 * loop, running once across all nodes, closes any open session past its
 * `expires_at` that no timer did (its actor was lost or never started).
 */
export const layerExpiryReaper = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* SessionsConfig
    const repo = yield* SessionsRepo
    const actors = yield* SessionActors
    const sweep = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const { expired, stuck } = yield* repo.overdue(new Date(now), new Date(now - STUCK_CREATING_MS), 100)
      yield* Effect.forEach(expired, (address) => actors.close(address, "ttl_expired"), {
        concurrency: 4,
        discard: true
      })
      // A session whose start message was lost (its node died between the insert and the
      // message) would stay creating until its TTL: start it again (starting is idempotent).
      yield* Effect.forEach(stuck, (address) => actors.start(address), { discard: true })
    })
    const loop = sweep.pipe(
      Effect.catchCause((cause) => Effect.logError("session.reaper_failed", { cause })),
      Effect.andThen(Effect.sleep(config.reaperIntervalMs)),
      Effect.forever
    )
    return Singleton.make("rbs/sessions/ExpiryReaper", loop)
  })
)
