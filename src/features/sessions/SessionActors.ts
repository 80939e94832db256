import { Context, Effect, Layer, Option, Schedule, type Schema } from "effect"
import type * as PageActions from "../../runtime/Drive.ts"
import type { EndedReason } from "../../kernel/Session.ts"
import { entityIdOf, type SessionAddress } from "../../platform/cluster/SessionAddress.ts"
import type { ClosedBy } from "./SessionLifecycle.ts"
import { type Caller, Session, SessionGone } from "./SessionRpcs.ts"
import { SessionNotOpen } from "../../kernel/Errors.ts"
import { type SessionRow, SessionsRepo } from "./SessionsRepo.ts"

/** What the actor's client is, for a sandbox call. */
export type SessionClient = Effect.Success<typeof Session.client> extends (id: string) => infer C ? C : never

/** Errors of the cluster's routing, and a runtime's failure: defects of the caller's request (500). */
type Routing = { readonly _tag: (typeof ROUTING)[number] }

const ROUTING = [
  "MailboxFull",
  "AlreadyProcessingMessage",
  "PersistenceError",
  "EntityNotAssignedToRunner",
  "RuntimeFailed"
] as const

/** The caller's own errors of a call, its routing ones taken as defects. */
const routed = <A, E>(call: Effect.Effect<A, E>) =>
  Effect.catchIf(
    call,
    (error): error is Extract<E, Routing> =>
      typeof error === "object" &&
      error !== null &&
      (ROUTING as ReadonlyArray<string>).includes((error as { _tag?: string })._tag ?? ""),
    Effect.die
  ) as Effect.Effect<A, Exclude<E, Routing>>

export type { Caller }

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
    /** Starts the session's actor; `row`, the row just inserted, saves the actor reading it. */
    readonly start: (address: SessionAddress, row?: SessionRow) => Effect.Effect<void>
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
    /**
     * The session's sandbox calls, by `call` of its client (the actor's RPCs
     * `Exec`, `Commands`, ...), as `caller`: answered where the session runs,
     * `session_not_open` once its node is lost.
     */
    readonly sandbox: <A, E>(
      address: SessionAddress,
      call: (client: SessionClient) => Effect.Effect<A, E | Routing>
    ) => Effect.Effect<A, Exclude<E, Routing> | SessionNotOpen>
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
      const routing = ROUTING
      return SessionActors.of({
        start: (address, row) =>
          whileOpen(
            address,
            clientFor(address)
              .Start(row === undefined ? {} : { row }, { discard: true })
              .pipe(Effect.orDie),
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
          ),
        sandbox: (address, call) =>
          whileOpen<any, any>(address, routed(call(clientFor(address))), Effect.fail(new SessionNotOpen()))
      })
    })
  )
}
