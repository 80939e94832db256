import { Clock, Effect, Layer, Option } from "effect"
import { NodeConfig } from "../../platform/config/Config.ts"
import { Nodes } from "../../platform/cluster/Nodes.ts"
import { SessionLifecycle } from "./SessionLifecycle.ts"
import { SessionsRepo } from "./SessionsRepo.ts"

/**
 * Several nodes only (`RUNNER_ADDRESS`): every node ends the open sessions
 * of any node silent for `clusterTimings.nodeLostAfterMs` as `error` / `node_lost`,
 * through the lifecycle door, so each is billed once for what its proxy last
 * flushed and its concurrency slot frees. Every node sweeps, not a cluster
 * Singleton: a Singleton on the lost node would wait for its shard to move
 * (the lock's expiry), and the row's `status IN ('creating', 'ready')` guard
 * lets only one sweep end it. A session so ended stays ended: its node, if it
 * comes back, finds the row closed. Worst case from a SIGKILL to the row
 * ended: 4 beats of silence + one sweep (a beat) + one beat, 12 s by default.
 */
export const layer = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* NodeConfig
    if (Option.isNone(config.runner)) return Layer.empty
    // Each node looks for lost nodes' sessions once a beat.
    const { nodeLostAfterMs, heartbeatMs } = config.clusterTimings
    const repo = yield* SessionsRepo
    const nodes = yield* Nodes
    const lifecycle = yield* SessionLifecycle
    const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

    const sweep = Effect.gen(function* () {
      const at = yield* now
      const silent = yield* nodes.silentSince(new Date(at.getTime() - nodeLostAfterMs))
      const lost = silent.length === 0 ? [] : yield* repo.openOnNodes(silent, 100)
      yield* Effect.forEach(
        lost,
        (id) => lifecycle.recordEnded(id, { status: "error", reason: "node_lost", at }),
        { discard: true }
      )
      if (lost.length > 0) yield* Effect.logWarning("session.node_lost", { count: lost.length })
    })
    return Layer.effectDiscard(
      Effect.forkScoped(
        sweep.pipe(
          Effect.catchCause((cause) => Effect.logError("node.loss_sweep_failed", { cause })),
          Effect.andThen(Effect.sleep(heartbeatMs)),
          Effect.forever
        )
      )
    )
  })
)
