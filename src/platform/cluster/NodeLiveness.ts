import { Clock, Effect, Layer, Option } from "effect"
import { Sharding } from "effect/cluster"
import { SqlClient } from "effect/sql"
import { ServiceConfig } from "../config/Config.ts"
import { NodeCapacity } from "./NodeCapacity.ts"
import { NodeDrain } from "./NodeDrain.ts"
import { heldShards } from "./Placement.ts"
import { SessionLifecycle } from "../../features/sessions/SessionLifecycle.ts"
import { SessionsRepo } from "../../features/sessions/SessionsRepo.ts"

/** How often a node says it is alive. */
export const HEARTBEAT_MS = 2_000
/** How often a node looks whether its runner's shards changed (a beat follows at once if so). */
export const SHARD_CHECK_MS = 250
/** A node silent this long is lost. */
export const NODE_LOST_AFTER_MS = 8_000
/** How often each node looks for lost nodes' sessions. */
export const LOSS_SWEEP_MS = 2_000

/**
 * Several nodes only (`RUNNER_ADDRESS`): every node writes a heartbeat to
 * `nodes`, and ends the open sessions of any node silent for
 * `NODE_LOST_AFTER_MS` as `error` / `node_lost`, through the lifecycle door,
 * so each is billed once for what its proxy last flushed and its concurrency
 * slot frees. Every node sweeps, not a cluster Singleton: a Singleton on the
 * lost node would wait for its shard to move (the lock's expiry), and the
 * row's `status IN ('creating', 'ready')` guard lets only one sweep end it. A session so ended stays ended: its node, if
 * it comes back, finds the row closed. Worst case from a SIGKILL to the row
 * ended: 8 s of silence + one sweep (2 s) + one heartbeat (2 s), 12 s.
 */
export const layer = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* ServiceConfig
    if (Option.isNone(config.runner)) return Layer.empty
    const sql = yield* SqlClient.SqlClient
    const repo = yield* SessionsRepo
    const lifecycle = yield* SessionLifecycle
    const capacity = yield* NodeCapacity
    const sharding = yield* Sharding.Sharding
    const drain = yield* NodeDrain
    const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

    // The beat carries what placement needs: this node's places of each kind (none while it drains
    // or stops) and the shards of its own group it holds.
    let leaving = false
    let lastBeat = { at: 0, shards: "" }
    const beat = Effect.gen(function* () {
      const at = yield* now
      const shards = heldShards(sharding, config.nodeId)
      // A draining node's row says capacity 0 from the drain's start (it wrote it between two beats).
      if (drain.leaving()) leaving = true
      const places = leaving
        ? {}
        : Object.fromEntries(capacity.kinds.map((kind) => [kind, capacity.of(kind)] as const))
      yield* sql`
        INSERT INTO nodes (id, url, last_seen, capacities, shards)
        VALUES (${config.nodeId}, ${config.nodeUrl}, ${at}, ${JSON.stringify(places)}::jsonb, ${shards}::int[])
        ON CONFLICT (id) DO UPDATE SET url = excluded.url, last_seen = excluded.last_seen,
          capacities = excluded.capacities, shards = excluded.shards`
      lastBeat = { at: at.getTime(), shards: shards.join() }
    }).pipe(drain.beating)
    // Stopping: no new session is placed here (its own end as server_restart follows).
    const leave = Effect.suspend(() => {
      leaving = true
      return sql`UPDATE nodes SET capacities = '{}' WHERE id = ${config.nodeId}`
    }).pipe(Effect.catchCause((cause) => Effect.logWarning("node.leave_failed", { cause })))
    // Every HEARTBEAT_MS, and at once (within a check) when the runner's shards change: placement
    // reads which shards a node holds from its beat, and a join or a loss moves them.
    const heartbeat = Effect.gen(function* () {
      const at = yield* Clock.currentTimeMillis
      if (at - lastBeat.at >= HEARTBEAT_MS || heldShards(sharding, config.nodeId).join() !== lastBeat.shards)
        yield* beat
    }).pipe(
      // A failed beat (the database away) is tried again at the beat's pace, not the check's.
      Effect.catchCause((cause) =>
        Effect.logWarning("node.heartbeat_failed", { cause }).pipe(Effect.andThen(Effect.sleep(HEARTBEAT_MS)))
      ),
      Effect.andThen(Effect.sleep(SHARD_CHECK_MS)),
      Effect.forever
    )

    const sweep = Effect.gen(function* () {
      const at = yield* now
      const lost = yield* repo.openOnLostNodes(new Date(at.getTime() - NODE_LOST_AFTER_MS), 100)
      yield* Effect.forEach(
        lost,
        (id) => lifecycle.recordEnded(id, { status: "error", reason: "node_lost", at }),
        { discard: true }
      )
      if (lost.length > 0) yield* Effect.logWarning("session.node_lost", { count: lost.length })
    })
    const sweeper = sweep.pipe(
      Effect.catchCause((cause) => Effect.logError("node.loss_sweep_failed", { cause })),
      Effect.andThen(Effect.sleep(LOSS_SWEEP_MS)),
      Effect.forever
    )

    // Alive from before this node takes any message.
    yield* beat.pipe(Effect.orDie)
    return Layer.effectDiscard(
      Effect.all([Effect.forkScoped(heartbeat), Effect.forkScoped(sweeper), Effect.addFinalizer(() => leave)])
    )
  })
)
