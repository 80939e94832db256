import { Effect } from "effect"
import { Sharding } from "effect/cluster"
import { HttpApiBuilder } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { Api } from "./Api.ts"
import { heldShards } from "../../platform/cluster/Placement.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import { NodeDraining, ServiceUnavailable } from "../../kernel/Errors.ts"
import { NodeDrain } from "../../platform/cluster/NodeDrain.ts"
import { RuntimePools } from "../../runtime/RuntimePools.ts"
import { availabilityOf, type RuntimePool } from "../../runtime/SessionRuntime.ts"

const stateOf = (pool: RuntimePool) =>
  Effect.all({ idle: pool.idle, target: pool.target, capacity: Effect.succeed(pool.capacity) })

/** Each kind this node has a pool of: whether it runs it, and why not. */
const kindsOf = (pools: ReadonlyArray<RuntimePool>) =>
  Object.fromEntries(pools.map((pool) => [pool.kind, availabilityOf(pool)] as const))

export const SystemHttp = HttpApiBuilder.group(
  Api,
  "system",
  Effect.fn(function* (handlers) {
    const sql = yield* SqlClient.SqlClient
    const pools = yield* RuntimePools
    const sharding = yield* Sharding.Sharding
    const config = yield* NodeConfig
    const drain = yield* NodeDrain
    return handlers
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        Effect.gen(function* () {
          if (drain.draining()) return yield* new NodeDraining()
          const database = yield* sql`SELECT 1`.pipe(Effect.timeout("2 seconds"), Effect.isSuccess)
          // Every kind this node has places for must have launched its first runtime.
          const poolsReady = yield* Effect.forEach(
            pools.all.filter((pool) => pool.capacity > 0),
            (pool) => pool.ready.pipe(Effect.timeoutOption("10 millis"))
          )
          if (!database || poolsReady.some((ready) => ready._tag === "None" || !ready.value))
            return yield* new ServiceUnavailable()
          return {
            status: "ready" as const,
            database: "ok" as const,
            browser_pool: yield* stateOf(pools.of("browser")),
            context_pool: yield* stateOf(pools.of("context")),
            sandbox_pool: yield* stateOf(pools.of("sandbox")),
            kinds: kindsOf(pools.all),
            node: { id: config.nodeId, shards: heldShards(sharding, config.nodeId).length }
          }
        })
      )
  })
)
