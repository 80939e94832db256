import { Context, Effect, Layer, Option, Schedule, type Schema } from "effect"
import type * as PageActions from "../../runtime/Drive.ts"
import type { EndedReason } from "../../kernel/Session.ts"
import { entityIdOf, type SessionAddress } from "../../platform/cluster/SessionAddress.ts"
import type { ClosedBy } from "./SessionLifecycle.ts"
import { Session, SessionGone } from "./SessionRpcs.ts"
import { SessionsRepo } from "./SessionsRepo.ts"

/** How long a message may wait for its node before the row is read: is the session still open? */
const ROW_CHECK_AFTER = "1 second"

/**
 * What the rest of the service may ask of a session's actor, by the
 * session's address (the row's `node_id`). Keeps `effect/cluster` (unstable)
 * out of the rest of the service.
 *
 * A node lost without warning leaves its shard group without a runner, and
 * a message to it would wait for one forever: each call also watches the
 * row (from a second on, so a call answered at once reads nothing) and gives
 * up once the loss sweep has ended the session (`node_lost`).
 */
export class SessionActors extends Context.Service<
  SessionActors,
  {
    /** Fire and forget: the entity takes a browser and marks the row ready. */
    readonly start: (address: SessionAddress) => Effect.Effect<void>
    /** True when this call ended the session; `closedBy` is audited with the change. */
    readonly close: (
      address: SessionAddress,
      reason: EndedReason,
      closedBy?: ClosedBy
    ) => Effect.Effect<boolean>
    readonly screenshot: (address: SessionAddress) => Effect.Effect<Uint8Array, SessionGone>
    readonly resize: (
      address: SessionAddress,
      width: number,
      height: number
    ) => Effect.Effect<void, SessionGone>
    readonly drive: (
      address: SessionAddress,
      action: PageActions.PageAction
    ) => Effect.Effect<Schema.Json, SessionGone | PageActions.PageActionFailed>
  }
>()("rbs/sessions/SessionActors") {
  static readonly layer = Layer.effect(
    SessionActors,
    Effect.gen(function* () {
      const makeClient = yield* Session.client
      const repo = yield* SessionsRepo
      const clientFor = (address: SessionAddress) => makeClient(entityIdOf(address))
      const ended = (address: SessionAddress) =>
        repo.findById(address.id).pipe(
          // Only the loss sweep ends a session beside its actor; any other end is the actor's answer.
          Effect.map((row) => Option.isNone(row) || row.value.ended_reason === "node_lost"),
          Effect.repeat({ until: (gone) => gone, schedule: Schedule.spaced("1 second") }),
          Effect.delay(ROW_CHECK_AFTER)
        )
      /** `message`, or `otherwise` once the row says the session has ended (its node lost). */
      const whileOpen = <A, E>(
        address: SessionAddress,
        message: Effect.Effect<A, E>,
        otherwise: Effect.Effect<A, E>
      ) => Effect.raceFirst(message, Effect.andThen(ended(address), otherwise))
      // Routing errors, and a runtime that failed the request: the caller's request fails (500).
      const routing = [
        "MailboxFull",
        "AlreadyProcessingMessage",
        "PersistenceError",
        "EntityNotAssignedToRunner",
        "RuntimeFailed"
      ] as const
      return SessionActors.of({
        start: (address) =>
          whileOpen(
            address,
            clientFor(address).Start(undefined, { discard: true }).pipe(Effect.orDie),
            Effect.void
          ),
        close: (address, reason, closedBy) =>
          whileOpen(
            address,
            clientFor(address)
              .Close(closedBy === undefined ? { reason } : { reason, closedBy })
              .pipe(Effect.orDie),
            Effect.succeed(false)
          ),
        screenshot: (address) =>
          whileOpen(
            address,
            clientFor(address).Screenshot().pipe(Effect.catchTag(routing, Effect.die)),
            Effect.fail(new SessionGone())
          ),
        resize: (address, width, height) =>
          whileOpen(
            address,
            clientFor(address).Resize({ width, height }).pipe(Effect.catchTag(routing, Effect.die)),
            Effect.fail(new SessionGone())
          ),
        drive: (address, action) =>
          whileOpen(
            address,
            clientFor(address).Drive({ action }).pipe(Effect.catchTag(routing, Effect.die)),
            Effect.fail(new SessionGone())
          )
      })
    })
  )
}
