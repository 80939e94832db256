import { Context, Effect, Layer } from "effect"
import * as BrowserRuntime from "../browser/BrowserRuntime.ts"
import type { SessionType } from "../domain/Session.ts"
import { RuntimeLaunchError, type RuntimePool } from "./SessionRuntime.ts"

/** A kind this node does not run: no place, and every acquire refused. */
export const unavailable = (kind: SessionType): RuntimePool => ({
  kind,
  acquire: () => Effect.fail(new RuntimeLaunchError({ message: `this node runs no ${kind} sessions` })),
  retire: () => Effect.void,
  idle: Effect.succeed(0),
  target: Effect.succeed(0),
  capacity: 0,
  ready: Effect.succeed(true)
})

/**
 * The node's pools, one per kind of session runtime. A session's actor takes
 * its runtime from the pool of its row's `session_type`; placement, the
 * heartbeat and `/readyz` read each pool's capacity.
 */
export class RuntimePools extends Context.Service<
  RuntimePools,
  {
    readonly of: (kind: SessionType) => RuntimePool
    readonly all: ReadonlyArray<RuntimePool>
  }
>()("rbs/runtime/RuntimePools") {
  static readonly fromPools = (pools: ReadonlyArray<RuntimePool>) => {
    const byKind = new Map(pools.map((pool) => [pool.kind, pool]))
    return RuntimePools.of({
      of: (kind) => byKind.get(kind) ?? unavailable(kind),
      all: pools
    })
  }

  /** Needs the `BrowserPool` and `Recordings`. */
  static readonly layerNoDeps = Layer.effect(
    RuntimePools,
    Effect.map(BrowserRuntime.pool, (browsers) => RuntimePools.fromPools([browsers, unavailable("sandbox")]))
  )
}
