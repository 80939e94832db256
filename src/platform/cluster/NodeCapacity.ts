import { Context } from "effect"

/**
 * This node's places of each kind of session runtime (`MAX_BROWSERS`,
 * `MAX_CONTEXTS`, `MAX_SANDBOXES`, ...), as its heartbeat reports them and
 * placement counts them. The composition root fills it from the runtime
 * pools (`RuntimePools.nodeCapacity`): the cluster knows no kind by name.
 */
export class NodeCapacity extends Context.Service<
  NodeCapacity,
  {
    /** The kinds this node has a pool of (a pool may have no places). */
    readonly kinds: ReadonlyArray<string>
    /** Its places of `kind`; 0 for a kind it has no pool of. */
    readonly of: (kind: string) => number
    /**
     * Why this node runs no sessions of `kind` at all (its places are 0 by its
     * settings or for want of something on the machine), and what would change
     * that; `undefined` when it runs them. Found at start: a drain changes nothing here.
     */
    readonly reasonOf: (kind: string) => string | undefined
  }
>()("rbs/cluster/NodeCapacity") {}
