import * as NodeCrypto from "@effect/platform-node/NodeCrypto"
import { Duration, Effect, Layer, Option } from "effect"
import {
  RunnerAddress,
  RunnerHealth,
  Runners,
  ShardingConfig,
  SingleRunner,
  SocketRunner,
  SqlMessageStorage,
  SqlRunnerStorage
} from "effect/cluster"
import { Digest } from "effect/crypto"
import { RpcSerialization } from "effect/rpc"
import { NodeConfig } from "../config/Config.ts"
import { Secrets } from "../crypto/Secrets.ts"
import { NodeProbe } from "./NodeProbe.ts"
import * as RunnerTransport from "./RunnerTransport.ts"
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
  return {
    shardsPerGroup: SHARDS_PER_GROUP,
    availableShardGroups: groups,
    assignedShardGroups: groups,
    // A message to an actor of this node is handed over as it is, not encoded and decoded again to
    // play a remote one (the library's default): a session's start, its close and its screenshot's
    // bytes cost the two codecs' CPU each. A message to another node is encoded as ever.
    simulateRemoteSerialization: false
  }
}

/**
 * A runner over sockets, as effect/cluster's own Node layer builds one, but on
 * the authenticated transport (`RunnerTransport`): the server, the client
 * protocol and the health pings all speak TLS with the cluster's credentials.
 */
const socketRunner = (
  shardingConfig: Partial<ShardingConfig.ShardingConfig["Service"]>,
  transport: ReturnType<typeof RunnerTransport.layer>
) =>
  Layer.provide(SocketRunner.layer, [transport.server, transport.client]).pipe(
    Layer.provide(
      RunnerHealth.layerPing.pipe(Layer.provide(Runners.layerRpc), Layer.provide(transport.client))
    ),
    Layer.merge(NodeProbe.layerPing.pipe(Layer.provide(transport.client))),
    Layer.provideMerge(SqlMessageStorage.layer.pipe(Layer.provide(NodeCrypto.layerDigest))),
    Layer.provide(Layer.orDie(SqlRunnerStorage.layer)),
    Layer.provide(ShardingConfig.layerFromEnv(shardingConfig)),
    Layer.provide(RpcSerialization.layerSchemaBinary())
  )

export const ClusterLive = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* NodeConfig
    const secrets = yield* Secrets
    return Option.match(config.runner, {
      onNone: () =>
        // Nothing is persisted for an entity (a live session holds its actor with a request in
        // flight), so the storage read stays at the default pace (10 s) instead of one a second.
        Layer.merge(
          SingleRunner.layer({ runnerStorage: "sql", shardingConfig: shardGroups(config.nodeId) }),
          NodeProbe.layerNone
        ),
      onSome: (runner) =>
        socketRunner(
          {
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
          },
          RunnerTransport.layer(
            runner.listen,
            runner.tls === undefined
              ? { _tag: "Key", key: secrets.runnerKey }
              : { _tag: "Certificates", ...runner.tls }
          )
        )
    })
  })
).pipe(Layer.provide(Digest.layerWebCrypto))
