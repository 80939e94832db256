import { Clock, Context, Effect, Layer, Option, Schedule, Semaphore } from "effect"
import { SqlClient } from "effect/sql"
import { collect } from "../../kernel/Plugins.ts"
import { ClusterConfig, NodeConfig } from "../config/Config.ts"

/** How often a draining node looks whether its last session has ended. */
export const DRAIN_CHECK_MS = 250

/** Work a draining node waits for, which a feature holds on it (its open sessions, its unfinished recordings). */
export interface DrainWait {
  /** What it counts, as the drain's log names it. */
  readonly name: string
  /** How much of it is left on the node. */
  readonly left: (nodeId: string) => Effect.Effect<number>
}

/** The work a draining node waits for, as the composition root lists it (`NodeDrain.waits`). */
export class DrainWaits extends Context.Service<DrainWaits, ReadonlyArray<DrainWait>>()(
  "rbs/cluster/DrainWaits"
) {
  static readonly layer = <Wait extends Effect.Effect<DrainWait, any, any>>(
    waits: ReadonlyArray<Wait>
  ): Layer.Layer<DrainWaits, Effect.Error<Wait>, Effect.Services<Wait>> =>
    Layer.effect(DrainWaits, collect(waits))
}

/**
 * A node's graceful stop. `drain` (the first SIGTERM, `ServiceMain`) makes
 * the node take no new session (its `nodes` row says capacity 0, written
 * between two heartbeats), then answers `/readyz` with 503 `draining`, and
 * waits until this node holds no open session and no unfinished recording,
 * and relays no client's connection to another node's session (a client
 * that connected through this node stays connected), or `DRAIN_SECONDS` has
 * passed. Meanwhile everything else goes on as
 * before: REST through any node, CDP directly and through the hop, egress
 * metering and billing, TTLs, webhooks. When `drain` returns the service's
 * scope closes: the sessions still open end as `server_restart` through
 * their actors (billed once), its shards and its claimed webhook deliveries
 * go to the other nodes.
 */
export class NodeDrain extends Context.Service<
  NodeDrain,
  {
    /** Whether the drain has begun: `/readyz` says so once the `nodes` row has capacity 0. */
    readonly draining: () => boolean
    /** Whether new sessions may no longer be placed here (set just before `draining`). */
    readonly leaving: () => boolean
    /**
     * Runs `beat` (a heartbeat that reads `leaving` and writes the capacities) so that
     * no beat that read the old value lands after the drain wrote capacity 0.
     */
    readonly beating: <A, E, R>(beat: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
    /** Begins the drain (once) and waits for its end; at once when `DRAIN_SECONDS` is 0. */
    readonly drain: Effect.Effect<void>
    /** `relay`, a client's connection relayed to another node, counted while it lasts: the drain waits for it. */
    readonly relaying: <A, E, R>(relay: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  }
>()("rbs/cluster/NodeDrain") {
  static readonly layer = Layer.effect(
    NodeDrain,
    Effect.gen(function* () {
      const config = { ...(yield* NodeConfig), ...(yield* ClusterConfig) }
      const waits = yield* DrainWaits
      const sql = yield* SqlClient.SqlClient
      const beats = yield* Semaphore.make(1)
      let leaving = false
      let draining = false
      let relayed = 0
      const relaying = <A, E, R>(relay: Effect.Effect<A, E, R>) =>
        Effect.acquireUseRelease(
          Effect.sync(() => relayed++),
          () => relay,
          () => Effect.sync(() => relayed--)
        )

      const left = Effect.map(
        Effect.forEach(waits, (wait) =>
          Effect.map(wait.left(config.nodeId), (count) => [wait.name, count] as const)
        ),
        (counts): Record<string, number> => ({ ...Object.fromEntries(counts), relayed })
      )
      const drain = Effect.gen(function* () {
        if (config.drainSeconds === 0) return
        // The row first, between beats: once /readyz says draining, no create places a session here.
        yield* beats.withPermits(1)(
          Effect.gen(function* () {
            leaving = true
            if (Option.isSome(config.runner))
              yield* sql`UPDATE nodes SET capacities = '{}' WHERE id = ${config.nodeId}`.pipe(
                Effect.catchCause((cause) => Effect.logWarning("node.leave_failed", { cause }))
              )
          })
        )
        draining = true
        const startedAt = yield* Clock.currentTimeMillis
        yield* Effect.logWarning("node.draining", {
          nodeId: config.nodeId,
          drainSeconds: config.drainSeconds,
          ...(yield* left)
        })
        const rest = yield* left.pipe(
          Effect.repeat({
            until: (now) => Object.values(now).every((count) => count === 0),
            schedule: Schedule.spaced(DRAIN_CHECK_MS)
          }),
          Effect.timeoutOption(config.drainSeconds * 1000),
          Effect.andThen(left)
        )
        yield* Effect.logWarning("node.drained", {
          nodeId: config.nodeId,
          seconds: Math.round(((yield* Clock.currentTimeMillis) - startedAt) / 100) / 10,
          // Still open at the deadline: they end as server_restart now.
          ...rest
        })
      })
      return NodeDrain.of({
        draining: () => draining,
        leaving: () => leaving,
        beating: (beat) => beats.withPermits(1)(beat),
        drain,
        relaying
      })
    })
  )
}
