/**
 * Where a session's actor lives: the session and the node that holds its
 * runtime. Placement chooses the node; the address then leads there for the
 * session's whole life.
 *
 * Why a shard group per node, not addressing by the row's `node_id` beside
 * the cluster: effect/cluster builds one hash ring per shard group from the
 * groups each runner registers, so a group only one node's runner serves is
 * owned by that node whatever joins or leaves. A session entity's id carries
 * its node (`<session>@<node>`) and its shard group is `node:<node>`: every
 * message (start, close, screenshot, resize) reaches the node that holds the
 * browser through the cluster's own routing, and a join or a loss moves only
 * the shards of the `default` group (the singletons), never a live session's.
 * One door stays: callers address sessions through `SessionActors` with the
 * row's `node_id`, and connections through the node hop to its `node_url`.
 */
export interface SessionAddress {
  readonly id: string
  readonly nodeId: string
}

/** The shard group only `nodeId`'s runner serves. */
export const nodeShardGroup = (nodeId: string) => `node:${nodeId}`

/** A session entity's id: the session, then its node (a session id has no `@`). */
export const entityIdOf = (address: SessionAddress) => `${address.id}@${address.nodeId}`

/** `entityIdOf` read back. */
export const addressOf = (entityId: string): SessionAddress => {
  const at = entityId.indexOf("@")
  return at < 0 ? { id: entityId, nodeId: "" } : { id: entityId.slice(0, at), nodeId: entityId.slice(at + 1) }
}

/** The shard group of a session entity, from its id. */
export const shardGroupOfEntity = (entityId: string) => nodeShardGroup(addressOf(entityId).nodeId)
