import { Context, Effect, Layer, type Scope } from "effect"
import { collect } from "../kernel/Plugins.ts"
import type { RuntimeKind } from "../kernel/Session.ts"
import { NodeCapacity } from "../platform/cluster/NodeCapacity.ts"
import { availabilityOf, type RuntimePool, unavailable } from "./SessionRuntime.ts"

export { unavailable } from "./SessionRuntime.ts"

/**
 * The node's pools, one per kind of session runtime. A session's actor takes
 * its runtime from the pool of its row's `session_type`; placement, the
 * heartbeat and `/readyz` read each pool's capacity.
 */
export class RuntimePools extends Context.Service<
  RuntimePools,
  {
    readonly of: (kind: RuntimeKind) => RuntimePool
    readonly all: ReadonlyArray<RuntimePool>
  }
>()("rbs/runtime/RuntimePools") {
  static readonly fromPools = (pools: ReadonlyArray<RuntimePool>) => {
    const byKind = new Map(pools.map((pool) => [pool.kind, pool]))
    return RuntimePools.of({
      of: (kind) => byKind.get(kind) ?? unavailable(kind, `this service has no ${kind} runtime`),
      all: pools
    })
  }

  /**
   * The node's pools, each built by its runtime's module: the composition
   * root names the kinds this service runs (`main/App.ts`). A kind the node
   * does not run is logged once, with why (`sandbox.unavailable`, ...).
   */
  static readonly layer = <Pool extends Effect.Effect<RuntimePool, any, any>>(
    pools: ReadonlyArray<Pool>
  ): Layer.Layer<RuntimePools, Effect.Error<Pool>, Exclude<Effect.Services<Pool>, Scope.Scope>> =>
    Layer.effect(
      RuntimePools,
      Effect.gen(function* () {
        const built = yield* collect(pools)
        for (const pool of built) {
          const availability = availabilityOf(pool)
          if (!availability.available)
            yield* Effect.logWarning(`${pool.kind}.unavailable`, {
              kind: pool.kind,
              reason: availability.reason
            })
        }
        return RuntimePools.fromPools(built)
      })
    )

  /** The node's places of each kind, as the cluster's heartbeat and placement read them. */
  static readonly nodeCapacity = Layer.effect(
    NodeCapacity,
    RuntimePools.useSync((pools) =>
      NodeCapacity.of({
        kinds: pools.all.map((pool) => pool.kind),
        of: (kind) => pools.all.find((pool) => pool.kind === kind)?.capacity ?? 0,
        reasonOf: (kind) => {
          const availability = availabilityOf(pools.of(kind))
          return availability.available ? undefined : availability.reason
        }
      })
    )
  )
}
