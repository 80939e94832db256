import { Context, Effect, Layer, Metric, Option, Schema } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import { Audit } from "../audit/Audit.ts"
import { CurrentOrigin } from "../policy/AuthMiddleware.ts"
import { OwnerSchema, type Principal } from "../../kernel/Owner.ts"
import type { EndedReason } from "../../kernel/Session.ts"
import { sessionsEnded } from "./SessionMetrics.ts"
import {
  type Changed,
  type ReadyFacts,
  type EgressFigures,
  type SessionRow,
  SessionsRepo,
  type StatementPart
} from "./SessionsRepo.ts"

/**
 * A hook runs inside the transaction that records the change, after it, with the changed row; its
 * failure rolls the change back. With one, the change takes a transaction of its own (a round trip
 * for its start, one for its end); the service's own features use parts instead.
 */
export type SessionHook = (row: SessionRow) => Effect.Effect<void>

/**
 * What a feature adds to a change as a part of the statement that makes it (the outbox's events,
 * billing's charge, the assistants' wake-up): CTEs of its `WITH` list that read the changed row
 * from the CTE named `changed` (no row when the change did not happen), all named from `prefix`.
 * Without hooks, the change and everything the parts write with it are one statement: one round
 * trip, all of it or none.
 */
export type SessionPart<Facts> = (
  changed: string,
  prefix: string,
  facts: Facts
) => Effect.Effect<LifecyclePart>

/** A part, and what to do with its output once the change is made (a metric). */
export interface LifecyclePart extends StatementPart {
  readonly after?: ((output: unknown) => Effect.Effect<void>) | undefined
}

export interface SessionHooksShape {
  /** After `creating` -> `ready`. */
  readonly ready: ReadonlyArray<SessionHook>
  /** In the statement of `creating` -> `ready` (the webhook outbox's `session.ready`). */
  readonly readyParts: ReadonlyArray<SessionPart<ReadyFacts>>
  /** After an open session -> `closed` / `error`, with its final counters (billing's debit). */
  readonly ended: ReadonlyArray<SessionHook>
  /** In the statement of the end (`session.closed` / `session.error`). */
  readonly endedParts: ReadonlyArray<SessionPart<EndedFacts>>
}

/**
 * What features add to a session's transitions. Each feature contributes its
 * hooks as a layer over the ones below it (`SessionHooks.add`), so the
 * composition root decides which features run, and in what order.
 */
export class SessionHooks extends Context.Service<SessionHooks, SessionHooksShape>()(
  "rbs/sessions/SessionHooks"
) {
  static readonly layerNone = Layer.succeed(
    SessionHooks,
    SessionHooks.of({ ready: [], readyParts: [], ended: [], endedParts: [] })
  )

  /** A layer adding `make`'s hooks after those of the `SessionHooks` it is provided with. */
  static readonly add = <E, R>(make: Effect.Effect<Partial<SessionHooksShape>, E, R>) =>
    Layer.effect(
      SessionHooks,
      Effect.gen(function* () {
        const below = yield* SessionHooks
        const mine = yield* make
        return SessionHooks.of({
          ready: [...below.ready, ...(mine.ready ?? [])],
          readyParts: [...below.readyParts, ...(mine.readyParts ?? [])],
          ended: [...below.ended, ...(mine.ended ?? [])],
          endedParts: [...below.endedParts, ...(mine.endedParts ?? [])]
        })
      })
    )
}

export type { ReadyFacts }

export interface EndedFacts {
  readonly status: "closed" | "error"
  readonly reason: EndedReason
  readonly at: Date
  /** The egress proxy's final figures; absent when the browser's proxy is gone (restart). */
  readonly counters?: EgressFigures | undefined
  /** Who closed it through the API: their `session.deleted` audit event joins the transaction. */
  readonly closedBy?: ClosedBy | undefined
}

/** The ends the service decides itself that its audit trail records, by the `system` actor. */
const SYSTEM: Principal = { _tag: "System" }

const SYSTEM_ENDS: Partial<Record<EndedReason, string>> = { idle_timeout: "session.idle_timeout" }

/** The caller of a `DELETE /v1/sessions/{id}`, carried to the session's actor. */
export const ClosedBy = Schema.Struct({
  owner: OwnerSchema,
  ip: Schema.NullOr(Schema.String),
  userAgent: Schema.NullOr(Schema.String)
})
export type ClosedBy = typeof ClosedBy.Type

/**
 * The one door for a session's transitions: every way a session becomes ready
 * or ends (delete, TTL, crash, launch failure, restart reconciliation) records
 * it here, in one transaction with the features' hooks, so a debit or an
 * outbox event is written exactly when the row changes and never twice.
 */
export class SessionLifecycle extends Context.Service<
  SessionLifecycle,
  {
    /** `creating` -> `ready`; `None` when the session was no longer creating. */
    readonly recordReady: (id: string, facts: ReadyFacts) => Effect.Effect<Option.Option<SessionRow>>
    /** An open session -> `closed` / `error`; `None` when it had already ended. */
    readonly recordEnded: (id: string, facts: EndedFacts) => Effect.Effect<Option.Option<SessionRow>>
  }
>()("rbs/sessions/SessionLifecycle") {
  static readonly layer = Layer.effect(
    SessionLifecycle,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* SessionsRepo
      const hooks = yield* SessionHooks
      const audit = yield* Audit

      const runHooks = (
        list: ReadonlyArray<SessionHook>,
        row: Option.Option<SessionRow>
      ): Effect.Effect<Option.Option<SessionRow>> =>
        Option.isSome(row)
          ? Effect.forEach(list, (hook) => hook(row.value), { discard: true }).pipe(Effect.as(row))
          : Effect.succeed(row)

      // One statement is its own transaction: open one only when hooks join it.
      const transactional = <A, E, R>(hookCount: number, effect: Effect.Effect<A, E, R>) =>
        hookCount === 0 ? effect : sql.withTransaction(effect)

      /** The CTE of the changed row, which the parts read. */
      const CHANGED = "changed"

      const parts = <Facts>(list: ReadonlyArray<SessionPart<Facts>>, facts: Facts) =>
        Effect.forEach(list, (part, index) => part(CHANGED, `part${index}`, facts))

      /** The parts' own follow-ups once the change is made, and the row. */
      const settled = (written: ReadonlyArray<LifecyclePart>) => (changed: Option.Option<Changed>) =>
        Option.isNone(changed)
          ? Effect.succeed(Option.none<SessionRow>())
          : Effect.forEach(
              written,
              (part, index) =>
                part.after === undefined ? Effect.void : part.after(changed.value.outputs[index]),
              { discard: true }
            ).pipe(Effect.as(Option.some(changed.value.row)))

      /**
       * The change with its parts in one statement; with hooks of the older kind, in a transaction
       * with them. The parts' follow-ups run once it is made.
       */
      const change = (
        written: ReadonlyArray<LifecyclePart>,
        list: ReadonlyArray<SessionHook>,
        make: (parts: ReadonlyArray<LifecyclePart>) => Effect.Effect<Option.Option<Changed>>
      ) =>
        transactional(
          list.length,
          Effect.flatMap(make(written), (changed) =>
            runHooks(
              list,
              Option.map(changed, (value) => value.row)
            ).pipe(Effect.as(changed))
          )
        ).pipe(Effect.flatMap(settled(written)))

      const recordReady = (id: string, facts: ReadyFacts) =>
        Effect.flatMap(parts(hooks.readyParts, facts), (written) =>
          change(written, hooks.ready, (all) => repo.markReady(id, facts, CHANGED, all))
        ).pipe(Sql.orDefect, Effect.withSpan("SessionLifecycle.recordReady"))

      // Who ended it, in the statement that ends it: the caller of a DELETE, or the system for the
      // ends its trail records.
      const auditEnd = (id: string, facts: EndedFacts) => {
        const closedBy = facts.closedBy
        if (closedBy !== undefined)
          return audit
            .recordPart("audit", CHANGED, closedBy.owner.principal, {
              action: "session.deleted",
              targetType: "session",
              targetId: id
            })
            .pipe(
              Effect.provideService(CurrentOrigin, { ip: closedBy.ip, userAgent: closedBy.userAgent }),
              Effect.map((ctes): ReadonlyArray<LifecyclePart> => [{ ctes }])
            )
        const action = SYSTEM_ENDS[facts.reason]
        return action === undefined
          ? Effect.succeed<ReadonlyArray<LifecyclePart>>([])
          : audit.recordPart("audit", CHANGED, SYSTEM, { action, targetType: "session", targetId: id }).pipe(
              Effect.provideService(CurrentOrigin, { ip: null, userAgent: null }),
              Effect.map((ctes): ReadonlyArray<LifecyclePart> => [{ ctes }])
            )
      }

      const recordEnded = (id: string, facts: EndedFacts) =>
        Effect.all([parts(hooks.endedParts, facts), auditEnd(id, facts)])
          .pipe(
            Effect.flatMap(([written, audited]) =>
              change([...written, ...audited], hooks.ended, (all) => repo.markEnded(id, facts, CHANGED, all))
            )
          )
          .pipe(
            Sql.orDefect,
            Effect.tap((row) =>
              Option.isSome(row)
                ? Effect.all([
                    Metric.update(Metric.withAttributes(sessionsEnded, { reason: facts.reason }), 1),
                    Effect.logInfo("session.closed", {
                      sessionId: id,
                      status: facts.status,
                      reason: facts.reason
                    })
                  ])
                : Effect.void
            ),
            Effect.withSpan("SessionLifecycle.recordEnded")
          )

      return SessionLifecycle.of({ recordReady, recordEnded })
    })
  )
}
