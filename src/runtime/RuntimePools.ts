import { Context, Effect, Layer } from "effect"
import * as BrowserRuntime from "../runtimes/browser/BrowserRuntime.ts"
import * as ContextRuntime from "../runtimes/context/ContextRuntime.ts"
import type { RuntimeKind } from "../kernel/Session.ts"
import * as SandboxRuntime from "../runtimes/sandbox/SandboxRuntime.ts"
import { type RuntimePool, unavailable } from "./SessionRuntime.ts"

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
      of: (kind) => byKind.get(kind) ?? unavailable(kind),
      all: pools
    })
  }

  /** Needs the `BrowserPool`, `Recordings`, `SandboxHost`, `Images` and `EgressProxies`. */
  static readonly layerNoDeps = Layer.effect(
    RuntimePools,
    Effect.map(Effect.all([BrowserRuntime.pool, ContextRuntime.pool, SandboxRuntime.pool]), (pools) =>
      RuntimePools.fromPools(pools)
    )
  )
}
