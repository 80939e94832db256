import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import { Duration, Effect, Layer, Option } from "effect"
import { RunnerAddress, SingleRunner } from "effect/cluster"
import { Digest } from "effect/crypto"
import { NodeConfig } from "../config/Config.ts"
import { SHARDS_PER_GROUP } from "./Placement.ts"
import { nodeShardGroup } from "./SessionAddress.ts"

/**
 * Session actors. One node: `SingleRunner` with its storage in our Postgres.
 * Several (`RUNNER_ADDRESS` set): a runner over sockets on every node, shards
 * assigned through the shared Postgres.
 *
 * Each runner serves two shard groups: `default` (the singletons, spread over
 * the nodes and moved when one joins or leaves) and its node's own (the
 * sessions it holds, which no other runner serves: `SessionAddress`). Shard
 * locks are leases in the locks table, not advisory locks: effect/cluster
 * numbers advisory locks by a group's place in the node's own list of groups,
 * so `node:a` on one node and `node:b` on another would take the same lock.
 */
export const shardGroups = (nodeId: string) => {
  const groups = ["default", nodeShardGroup(nodeId)]
  return { shardsPerGroup: SHARDS_PER_GROUP, availableShardGroups: groups, assignedShardGroups: groups }
}

export const ClusterLive = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* NodeConfig
    return Option.match(config.runner, {
      onNone: () =>
        // Nothing is persisted for an entity (a live session holds its actor with a request in
        // flight), so the storage read stays at the default pace (10 s) instead of one a second.
        SingleRunner.layer({ runnerStorage: "sql", shardingConfig: shardGroups(config.nodeId) }),
      onSome: (runner) =>
        NodeClusterSocket.layer({
          storage: "sql",
          shardingConfig: {
            ...shardGroups(config.nodeId),
            runnerAddress: Option.some(RunnerAddress.make(runner.address.host, runner.address.port)),
            runnerListenAddress: Option.some(RunnerAddress.make(runner.listen.host, runner.listen.port)),
            entityMessagePollInterval: "1 second",
            shardLockDisableAdvisory: true,
            // A killed node's singletons move to the others within 5 beats, 10 s by default (the
            // library's: 10 s / 35 s); a joining node's shards come within 1.5 beats (its: 3 s).
            shardLockRefreshInterval: Duration.millis(config.clusterTimings.shardLockRefreshMs),
            shardLockExpiration: Duration.millis(config.clusterTimings.shardLockExpirationMs),
            refreshAssignmentsInterval: Duration.millis(config.clusterTimings.refreshAssignmentsMs)
          }
        })
    })
  })
).pipe(Layer.provide(Digest.layerWebCrypto))
