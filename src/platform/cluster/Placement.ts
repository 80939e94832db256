import { Clock, Context, Effect, Layer, Option } from "effect"
import { Sharding, ShardId } from "effect/cluster"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { clusterTimings, NodeConfig } from "../config/Config.ts"
import { CapacityExhausted, SessionKindUnavailable } from "../../kernel/Errors.ts"
import type { Isolation, RuntimeKind, SessionType } from "../../kernel/Session.ts"
import { NodeCapacity } from "./NodeCapacity.ts"
import { NodeDrain } from "./NodeDrain.ts"
import { NodeProbe } from "./NodeProbe.ts"
import { nodeShardGroup } from "./SessionAddress.ts"
import * as Sql from "../db/Sql.ts"

/**
 * Shards per group, the same on every node. A node's own group (its session
 * entities) needs few; the `default` group holds the singletons.
 */
export const SHARDS_PER_GROUP = 16

/**
 * How long a client refused for capacity should wait before trying again:
 * places free as sessions end, often within seconds, and a longer wait
 * stacked up in the open-loop bench (a client waiting 5 s per refusal).
 */
export const CAPACITY_RETRY_AFTER_SECONDS = 2

/**
 * The shards of its own group this node's runner holds now: all of them once
 * it has registered and taken their locks, and only then can a session placed
 * here start.
 */
export const heldShards = (sharding: Sharding.Sharding["Service"], nodeId: string): ReadonlyArray<number> => {
  const held: Array<number> = []
  for (let id = 1; id <= SHARDS_PER_GROUP; id++) {
    if (sharding.hasShardId(ShardId.make(nodeShardGroup(nodeId), id))) held.push(id)
  }
  return held
}

/** A node that can take a session of the kind asked for now. */
export interface NodeRoom {
  readonly id: string
  /** Its places of that kind. */
  readonly capacity: number
  /** Its open sessions of that kind (`creating` or `ready`) when the candidates were read. */
  readonly open: number
  /** Where its runner listens (another node of several), for the probe before it is picked. */
  readonly runnerAddress?: string | undefined
}

/** Most free places first; among equals, chance decides, so concurrent creates spread. */
export const byRoom = (nodes: ReadonlyArray<NodeRoom>, random: () => number = Math.random) =>
  nodes
    .filter((node) => node.open < node.capacity)
    .map((node) => ({ node, free: node.capacity - node.open, tie: random() }))
    .sort((a, b) => b.free - a.free || a.tie - b.tie)
    .map(({ node }) => node)

/** A kind of session as placement counts it: its places are `kind`'s, its open sessions the rows of its type and isolation. */
export interface PlacedKind {
  readonly kind: RuntimeKind
  readonly sessionType: SessionType
  readonly isolation: Isolation
}

/**
 * Open sessions (`creating` or `ready`) of a kind on each of some nodes, as
 * placement counts them against their places: the sessions feature
 * implements it, the composition root wires it.
 */
export class PlacedSessions extends Context.Service<
  PlacedSessions,
  {
    readonly openOn: (
      nodeIds: ReadonlyArray<string>,
      kind: PlacedKind
    ) => Effect.Effect<ReadonlyMap<string, number>>
  }
>()("rbs/cluster/PlacedSessions") {}

/** Where a new session goes: its id and the node recorded for it (its actor's address). */
export interface Place {
  readonly id: string
  readonly nodeId: string
}

/**
 * Session placement with capacity. Every node has places of each kind of
 * session (`MAX_BROWSERS`, `MAX_CONTEXTS`, `MAX_SANDBOXES`); a node's open sessions of a kind
 * (`creating` or `ready`, recorded with `node_id`) may not exceed its places
 * of that kind. A new session goes to the node with the most free places;
 * its address names that node, so its entity (and its runtime) starts and
 * stays there (`SessionAddress`). When no node has room, create is refused with 503
 * `capacity_exhausted` instead of queueing for a browser; when no node runs
 * the kind at all (every live node has 0 places of it, none of them
 * draining), with 503 `session_type_unavailable`, which a retry does not cure.
 *
 * `candidates` reads without locking, before the caller spends any rate
 * limit. `take` runs in the transaction that inserts the row: it locks the
 * best candidate's place count (an advisory lock per node), counts again and
 * keeps it only if there is still room; other candidates are tried without
 * waiting (a node another create is placing on right now is skipped), so a
 * transaction waits for one lock at most and two creates never deadlock.
 */
export class Placement extends Context.Service<
  Placement,
  {
    /**
     * The nodes with room for a session of `kind`, best first; with `only`,
     * that node alone (affinity: a job runs its session on the node that
     * claimed it, a workspace's session where its disk is), refused with
     * `capacity_exhausted` when that node has no room or no recent heartbeat.
     * Refused with `session_type_unavailable` when no node runs the kind.
     */
    readonly candidates: (
      kind: PlacedKind,
      only?: string
    ) => Effect.Effect<ReadonlyArray<NodeRoom>, CapacityExhausted | SessionKindUnavailable>
    /** Whether `nodeId` is placeable now: its heartbeat is recent and its runner serves its own group. */
    readonly isLive: (nodeId: string) => Effect.Effect<boolean>
    readonly take: (
      kind: PlacedKind,
      candidates: ReadonlyArray<NodeRoom>
    ) => Effect.Effect<Place, CapacityExhausted>
  }
>()("rbs/cluster/Placement") {
  /** This node's pools' capacities, and why it runs none of a kind; none while it drains (full, not unavailable). */
  static readonly layer = Layer.effect(
    Placement,
    Effect.gen(function* () {
      const config = yield* NodeConfig
      const capacity = yield* NodeCapacity
      const drain = yield* NodeDrain
      const probe = yield* NodeProbe
      return yield* Placement.make({
        nodeId: config.nodeId,
        answers: probe.answers,
        capacity: (kind) => (drain.leaving() ? 0 : capacity.of(kind)),
        unavailable: (kind) => (drain.leaving() ? undefined : capacity.reasonOf(kind)),
        several: Option.isSome(config.runner),
        placeableWithinMs: config.clusterTimings.placeableWithinMs
      })
    })
  )

  static readonly make = (options: {
    /** This node, and its places of each kind: the only candidate on a single runner. */
    readonly nodeId: string
    readonly capacity: (kind: RuntimeKind) => number
    /**
     * Why this node runs no sessions of a kind (`NodeCapacity.reasonOf`);
     * `undefined` when it runs them, or drains (then it is full, not lacking).
     * Absent: a node with no places of a kind says no more than that.
     */
    readonly unavailable?: ((kind: RuntimeKind) => string | undefined) | undefined
    /** Several nodes (`RUNNER_ADDRESS`): the candidates are the nodes with a recent heartbeat. */
    readonly several: boolean
    /** A node's heartbeat older than this takes it out of placement (`clusterTimings`; 6 s by default). */
    readonly placeableWithinMs?: number | undefined
    /**
     * Whether another node's runner answers now (`NodeProbe`): a candidate that does not is left
     * out, so a node that died since its last beat is not picked. Absent: every candidate answers.
     */
    readonly answers?: ((runnerAddress: string) => Effect.Effect<boolean>) | undefined
    /** A new session's id. */
    readonly makeId?: () => string
  }) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const makeId = options.makeId ?? (() => `sess_${Crypto.randomUUID()}`)
      const placeableWithinMs = options.placeableWithinMs ?? clusterTimings().placeableWithinMs
      const exhausted = (kind: PlacedKind) =>
        new CapacityExhausted({ retryAfterSeconds: CAPACITY_RETRY_AFTER_SECONDS, kind: kind.kind })

      const placed = yield* PlacedSessions
      const openOn = (nodeId: string, kind: PlacedKind) =>
        Effect.map(placed.openOn([nodeId], kind), (open) => open.get(nodeId) ?? 0)

      const ownReason = (kind: PlacedKind) => options.unavailable?.(kind.kind)

      // One node: this one, unless it runs none of the kind.
      const local = (kind: PlacedKind) =>
        Effect.gen(function* () {
          const reason = ownReason(kind)
          if (reason !== undefined) return yield* SessionKindUnavailable.here(kind.kind, reason)
          const room: NodeRoom = {
            id: options.nodeId,
            capacity: options.capacity(kind.kind),
            open: yield* openOn(options.nodeId, kind)
          }
          return [room]
        })

      // Several: the nodes whose heartbeat is recent and whose runner serves its own group, with
      // the capacity it carried. No kind is missing while a node that beat recently may still run
      // it: one with places of it (joining: its runner holds no shard yet), or one draining or
      // stopping (its beat carries no places at all, so what it runs is not known).
      const cluster = (kind: PlacedKind) =>
        Effect.gen(function* () {
          const cutoff = new Date((yield* Clock.currentTimeMillis) - placeableWithinMs)
          const rows = yield* sql<{
            readonly id: string
            readonly capacity: number
            readonly serving: boolean
            readonly leaving: boolean
            readonly runner_address: string | null
          }>`
            SELECT n.id, COALESCE((n.capacities ->> ${kind.kind})::int, 0) AS capacity,
              cardinality(n.shards) > 0 AS serving, n.capacities = '{}'::jsonb AS leaving, n.runner_address
            FROM nodes n
            WHERE n.last_seen > ${cutoff}`
          if (rows.length > 0 && rows.every((row) => row.capacity <= 0 && !row.leaving))
            return yield* SessionKindUnavailable.anywhere(kind.kind, ownReason(kind))
          const serving = rows.filter((row) => row.serving)
          const open = yield* placed.openOn(
            serving.map((row) => row.id),
            kind
          )
          return serving.map((row): NodeRoom => ({
            id: row.id,
            capacity: row.capacity,
            open: open.get(row.id) ?? 0,
            runnerAddress: row.id === options.nodeId ? undefined : (row.runner_address ?? undefined)
          }))
        })

      // The candidates with room whose runners answer now, all asked at once (this node is not asked).
      const answering = (nodes: ReadonlyArray<NodeRoom>) =>
        options.answers === undefined
          ? Effect.succeed(nodes)
          : Effect.filter(
              nodes,
              (node) =>
                node.runnerAddress === undefined
                  ? Effect.succeed(true)
                  : options.answers!(node.runnerAddress).pipe(
                      Effect.tap((answers) =>
                        answers
                          ? Effect.void
                          : Effect.logWarning("placement.node_unreachable", { nodeId: node.id })
                      )
                    ),
              { concurrency: "unbounded" }
            )

      const candidates = (kind: PlacedKind, only?: string) =>
        (options.several ? cluster(kind) : local(kind)).pipe(
          Sql.orDefect,
          Effect.map((nodes) =>
            byRoom(only === undefined ? nodes : nodes.filter((node) => node.id === only))
          ),
          Effect.flatMap(answering),
          Effect.filterOrFail(
            (nodes) => nodes.length > 0,
            () => exhausted(kind)
          )
        )

      // The lock's first key keeps it apart from other advisory locks on the database.
      const lockKey = 0x72627301
      const lock = (nodeId: string, wait: boolean) =>
        wait
          ? Effect.as(sql`SELECT pg_advisory_xact_lock(${lockKey}, hashtext(${nodeId}))`, true)
          : Effect.map(
              sql<{ readonly locked: boolean }>`
                SELECT pg_try_advisory_xact_lock(${lockKey}, hashtext(${nodeId})) AS locked`,
              (rows) => rows[0]?.locked === true
            )

      const take = (kind: PlacedKind, nodes: ReadonlyArray<NodeRoom>) =>
        Effect.gen(function* () {
          for (const [index, node] of nodes.entries()) {
            if (!(yield* lock(node.id, index === 0))) continue
            // Counted under the lock: a create that placed here before us has committed by now.
            if ((yield* openOn(node.id, kind)) >= node.capacity) continue
            return { id: makeId(), nodeId: node.id } satisfies Place
          }
          return yield* exhausted(kind)
        }).pipe(Sql.orDefect)

      const isLive = (nodeId: string) =>
        options.several
          ? Effect.gen(function* () {
              const cutoff = new Date((yield* Clock.currentTimeMillis) - placeableWithinMs)
              const rows = yield* sql<{ readonly id: string }>`
                SELECT id FROM nodes WHERE id = ${nodeId} AND last_seen > ${cutoff} AND cardinality(shards) > 0`
              return rows.length > 0
            }).pipe(Sql.orDefect)
          : Effect.succeed(nodeId === options.nodeId)

      return Placement.of({ candidates, take, isLive })
    })
}
