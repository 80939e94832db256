/**
 * The session actor's messages and their errors: what `SessionEntity` answers
 * and `SessionActors` sends. The entity and RPC tags address persisted
 * messages, so they never change.
 */
import { Schema } from "effect"
import { ClusterSchema, Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import * as PageActions from "../../runtime/Drive.ts"
import { EndedReason } from "../../kernel/Session.ts"
import { shardGroupOfEntity } from "../../platform/cluster/SessionAddress.ts"
import { ClosedBy } from "./SessionLifecycle.ts"

/** The session has no live runtime here (not started yet, or already ended). */
export class SessionGone extends Schema.TaggedError<SessionGone>()("SessionGone", {}) {}

/**
 * Takes the runtime, then stays in flight until the session ends: an entity
 * with a request in flight is never reaped as idle, so a live session holds
 * its actor without the persisted keep-alive message (three writes to the
 * cluster's message table per session, and a storage read). Its sender does
 * not wait (`discard`) nor bind it (`Uninterruptible: "client"`); the entity's
 * termination (shutdown, a shard moving) interrupts it at once.
 */
const Start = Rpc.make("Start")
  .annotate(ClusterSchema.Uninterruptible, "client")
  .annotate(ClusterSchema.InterruptOnTermination, true)
const Close = Rpc.make("Close", {
  payload: { reason: EndedReason, closedBy: Schema.optionalKey(ClosedBy) },
  success: Schema.Boolean
})
/**
 * The live runtime failed a request, or did not answer it within 30 s: the
 * caller's request fails (500), and the session lives on. Not a defect of the
 * entity's, which would restart it and end the session.
 */
export class RuntimeFailed extends Schema.TaggedError<RuntimeFailed>()("RuntimeFailed", {
  detail: Schema.String
}) {}

const Screenshot = Rpc.make("Screenshot", {
  success: Schema.Uint8Array,
  error: Schema.Union([SessionGone, RuntimeFailed])
})
const Resize = Rpc.make("Resize", {
  payload: { width: Schema.Int, height: Schema.Int },
  error: Schema.Union([SessionGone, RuntimeFailed])
})
/** An action on a browser session's front page (`PageActions`), answered with plain JSON. */
const Drive = Rpc.make("Drive", {
  payload: { action: PageActions.PageAction },
  success: Schema.Json,
  error: Schema.Union([SessionGone, RuntimeFailed, PageActions.PageActionFailed])
})

/**
 * A session as an actor: it owns a Scope holding the session's runtime (a
 * browser or a sandbox, taken from its kind's warm pool), its TTL timer and
 * its crash watcher. Closing that scope releases all of them, whatever the
 * reason. Nothing here depends on the kind: the runtime says what it is.
 */
export const Session = Entity.make("Session", [Start, Close, Screenshot, Resize, Drive]).annotate(
  ClusterSchema.ShardGroup,
  shardGroupOfEntity
)
