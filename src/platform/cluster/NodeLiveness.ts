import { Clock, Effect, Layer, Option } from "effect"
import { Sharding } from "effect/cluster"
import { SqlClient } from "effect/sql"
import { NodeConfig } from "../config/Config.ts"
import { NodeCapacity } from "./NodeCapacity.ts"
import { NodeDrain } from "./NodeDrain.ts"
import { heldShards } from "./Placement.ts"
import * as Sql from "../db/Sql.ts"

/** How often a node looks whether its runner's shards changed (a beat follows at once if so). */
export const SHARD_CHECK_MS = 250

/**
 * Several nodes only (`RUNNER_ADDRESS`): every node writes a heartbeat to
 * `nodes` every `clusterTimings.heartbeatMs` (its places of each kind and the
 * shards of its group it holds); a node silent for `nodeLostAfterMs` is lost
 * (`LostNodes` ends its sessions). On the way out the node says it has no places.
 */
export const layer = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* NodeConfig
    if (Option.isNone(config.runner)) return Layer.empty
    const { heartbeatMs } = config.clusterTimings
    const sql = yield* SqlClient.SqlClient
    const capacity = yield* NodeCapacity
    const sharding = yield* Sharding.Sharding
    const drain = yield* NodeDrain
    const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

    // The beat carries what placement needs: this node's places of each kind (none while it drains
    // or stops) and the shards of its own group it holds.
    const runnerAddress = `${config.runner.value.address.host}:${config.runner.value.address.port}`
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
        INSERT INTO nodes (id, url, runner_address, last_seen, capacities, shards)
        VALUES (${config.nodeId}, ${config.nodeUrl}, ${runnerAddress}, ${at}, ${JSON.stringify(places)}::jsonb, ${shards}::int[])
        ON CONFLICT (id) DO UPDATE SET url = excluded.url, runner_address = excluded.runner_address,
          last_seen = excluded.last_seen, capacities = excluded.capacities, shards = excluded.shards`
      lastBeat = { at: at.getTime(), shards: shards.join() }
    }).pipe(drain.beating)
    // Stopping: no new session is placed here (its own end as server_restart follows).
    const leave = Effect.suspend(() => {
      leaving = true
      return sql`UPDATE nodes SET capacities = '{}' WHERE id = ${config.nodeId}`
    }).pipe(Effect.catchCause((cause) => Effect.logWarning("node.leave_failed", { cause })))
    // Every beat, and at once (within a check) when the runner's shards change: placement
    // reads which shards a node holds from its beat, and a join or a loss moves them.
    const heartbeat = Effect.gen(function* () {
      const at = yield* Clock.currentTimeMillis
      if (at - lastBeat.at >= heartbeatMs || heldShards(sharding, config.nodeId).join() !== lastBeat.shards)
        yield* beat
    }).pipe(
      // A failed beat (the database away) is tried again at the beat's pace, not the check's.
      Effect.catchCause((cause) =>
        Effect.logWarning("node.heartbeat_failed", { cause }).pipe(Effect.andThen(Effect.sleep(heartbeatMs)))
      ),
      Effect.andThen(Effect.sleep(SHARD_CHECK_MS)),
      Effect.forever
    )

    // Alive from before this node takes any message.
    yield* beat.pipe(Sql.orDefect)
    return Layer.effectDiscard(Effect.all([Effect.forkScoped(heartbeat), Effect.addFinalizer(() => leave)]))
  })
)
