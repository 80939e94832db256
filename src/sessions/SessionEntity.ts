import {
  Cause,
  Clock,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  FiberSet,
  Layer,
  Metric,
  Option,
  Schedule,
  Schema,
  Scope,
  Semaphore
} from "effect"
import { ClusterSchema, Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import * as Cdp from "../browser/CdpClient.ts"
import * as PageActions from "../browser/PageActions.ts"
import { EndedReason, runtimeKindOf } from "../domain/Session.ts"
import { ServiceConfig } from "../Config.ts"
import { Egress } from "../egress/Egress.ts"
import { RuntimePools } from "../runtime/RuntimePools.ts"
import type { RuntimePool } from "../runtime/SessionRuntime.ts"
import { LiveSessions, type LiveSession } from "./LiveSessions.ts"
import { EgressMeter } from "./EgressMeter.ts"
import { ClosedBy, SessionLifecycle } from "./SessionLifecycle.ts"
import { readyLatency } from "./SessionMetrics.ts"
import { SessionsRepo } from "./SessionsRepo.ts"
import { sessionAttributes } from "../observability/Tracing.ts"
import { addressOf, entityIdOf, type SessionAddress, shardGroupOfEntity } from "../cluster/SessionAddress.ts"

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

interface Current {
  /** The runtime and its proxy: closed in the background once the session has ended. */
  readonly scope: Scope.Closeable
  /** The pool the runtime came from, which tears it down. */
  readonly pool: RuntimePool
  /** The TTL timer, the egress flush, the crash watcher and the runtime's own work: closed first, at once. */
  readonly watchers: Scope.Closeable
  readonly live: LiveSession
  readonly egress: EgressMeter
  /** Done when the session has ended: `Start` returns then. */
  readonly ended: Deferred.Deferred<void>
}

/** How often a session's live figures (egress, CDP connections) reach its row. */
export const EGRESS_FLUSH_INTERVAL = "1 second"

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

export const layerEntity = Session.toLayer(
  Effect.gen(function* () {
    const address = yield* Entity.CurrentAddress
    const id = addressOf(address.entityId).id
    const repo = yield* SessionsRepo
    const config = yield* ServiceConfig
    const lifecycle = yield* SessionLifecycle
    const pools = yield* RuntimePools
    const egress = yield* Egress
    const liveSessions = yield* LiveSessions
    const lock = yield* Semaphore.make(1)
    const background = yield* FiberSet.make()
    let current: Current | undefined
    // The account, once the row has been read: every span of this session carries both.
    let accountId: string | undefined
    const traced =
      (name: string) =>
      <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.suspend(() =>
          effect.pipe(Effect.withSpan(name), Effect.annotateSpans(sessionAttributes(id, accountId)))
        )
    const end = (status: "closed" | "error", reason: EndedReason, closedBy?: ClosedBy) =>
      lock
        .withPermits(1)(
          Effect.gen(function* () {
            const was = current
            current = undefined
            if (was !== undefined) Deferred.doneUnsafe(was.ended, Effect.void)
            // Connections learn the reason before the runtime dies under them.
            yield* liveSessions.end(id, reason)
            if (was !== undefined) {
              yield* Scope.close(was.watchers, Exit.void)
              // Cut off now: no byte moves any more. Killing and reaping it is teardown's, off the caller's path.
              yield* was.egress.tap.close
            }
            // No byte moves any more: these are the final figures.
            const counters = was === undefined ? undefined : yield* was.egress.read()
            const ended = yield* lifecycle.recordEnded(id, {
              status,
              reason,
              at: yield* now,
              counters,
              closedBy
            })
            if (Option.isSome(ended)) accountId = ended.value.account_id
            yield* Effect.annotateCurrentSpan({
              ...sessionAttributes(id, accountId),
              "rbs.ended_reason": reason
            })
            // Its teardown (in the background) is a span of the session's too.
            if (was !== undefined)
              yield* was.pool.retire(was.scope).pipe(Effect.annotateSpans(sessionAttributes(id, accountId)))
            return Option.isSome(ended)
          })
        )
        .pipe(traced("session.end"), Effect.uninterruptible)

    // Watchers live in the runtime's scope; they hand the close to the entity's
    // own fiber set, because closing a scope from a fiber inside it would
    // interrupt the closer.
    const endInBackground = (status: "closed" | "error", reason: EndedReason) =>
      FiberSet.run(background, end(status, reason)).pipe(Effect.asVoid)

    const start = lock
      .withPermits(1)(
        Effect.gen(function* () {
          const row = yield* repo.findById(id)
          if (Option.isNone(row) || row.value.status !== "creating" || current !== undefined) return
          accountId = row.value.account_id
          yield* Effect.annotateCurrentSpan(sessionAttributes(id, accountId))
          const region = egress.region(row.value.region).pipe(Option.getOrElse(() => egress.defaultRegion))
          const pool = pools.of(runtimeKindOf(row.value))
          const scope = yield* Scope.make()
          const acquired = yield* pool
            .acquire({
              sessionId: id,
              accountId: row.value.account_id,
              region,
              image: row.value.image,
              recording: row.value.recording,
              workspace:
                row.value.workspace_id === null
                  ? undefined
                  : { id: row.value.workspace_id, persistence: row.value.persistence ?? true }
            })
            .pipe(
              Scope.provide(scope),
              Effect.withSpan("session.acquire", {
                attributes: {
                  ...sessionAttributes(id, accountId),
                  "rbs.session.type": row.value.session_type
                }
              }),
              Effect.exit
            )
          if (Exit.isFailure(acquired)) {
            yield* Scope.close(scope, Exit.void)
            yield* Effect.logError("session.launch_failed", { sessionId: id, cause: acquired.cause })
            yield* lifecycle.recordEnded(id, { status: "error", reason: "launch_failed", at: yield* now })
            yield* liveSessions.end(id, "launch_failed")
            return
          }
          const runtime = acquired.value
          const meter = new EgressMeter(runtime.egress)
          const readyAt = yield* now
          const ready = yield* (
            lifecycle
              .recordReady(id, {
                at: readyAt,
                device: runtime.device,
                proxyRegion: region.name,
                nodeId: config.nodeId,
                nodeUrl: config.nodeUrl
              })
              // The runtime is ours now: if the ready transition fails, it must not outlive it.
              .pipe(
                Effect.onError(() => Scope.close(scope, Exit.void)),
                Effect.withSpan("session.ready", { attributes: sessionAttributes(id, accountId) })
              )
          )
          if (Option.isNone(ready)) {
            // Ended (deleted, expired) while we were taking the runtime.
            yield* Scope.close(scope, Exit.void)
            return
          }
          const live = yield* liveSessions.register(id, runtime)
          const watchers = yield* Scope.make()
          // Until the session ends (the watchers close first), e.g. a browser's recorder.
          yield* runtime.serve.pipe(Scope.provide(watchers))
          current = { scope, pool, watchers, live, egress: meter, ended: yield* Deferred.make<void>() }
          yield* Metric.update(readyLatency, (readyAt.getTime() - row.value.created_at.getTime()) / 1000)
          yield* Effect.logInfo("session.ready", {
            sessionId: id,
            sessionType: runtime.kind,
            pid: runtime.pid
          })

          const ttl = Duration.millis(Math.max(0, row.value.expires_at.getTime() - readyAt.getTime()))
          yield* Effect.sleep(ttl).pipe(
            Effect.andThen(endInBackground("closed", "ttl_expired")),
            Effect.forkIn(watchers)
          )
          // With the open CDP connections, so a node that does not hold the session can show them.
          yield* Effect.suspend(() =>
            meter.flush(live.connections, (figures) => repo.flushLive(id, figures))
          ).pipe(
            // A failed flush (the database away for a moment) is retried by the next one;
            // the final figures are written when the session ends whatever happened here.
            Effect.catchCause((cause) =>
              Cause.hasInterruptsOnly(cause)
                ? Effect.failCause(cause)
                : Effect.logWarning("session.flush_failed", { sessionId: id, cause })
            ),
            Effect.repeat(Schedule.spaced(EGRESS_FLUSH_INTERVAL)),
            Effect.forkIn(watchers)
          )
          yield* Deferred.await(runtime.exited).pipe(
            Effect.andThen(
              Effect.logWarning(`session.${runtime.crashReason}`, { sessionId: id, pid: runtime.pid })
            ),
            Effect.andThen(endInBackground("error", runtime.crashReason)),
            Effect.forkIn(watchers)
          )
        })
      )
      .pipe(traced("session.start"), Effect.uninterruptible)

    // The service is stopping: the runtime dies with it, and the row says so.
    yield* Effect.addFinalizer(() => (current !== undefined ? end("closed", "server_restart") : Effect.void))

    /**
     * `f` on the live runtime; a failure once the session has ended under it is `SessionGone`,
     * any other (a timeout too) `RuntimeFailed`.
     */
    const withRuntime = <A>(f: (live: LiveSession) => Effect.Effect<A, unknown>) =>
      Effect.suspend(() => {
        const live = current?.live
        if (live === undefined) return Effect.fail(new SessionGone())
        return f(live).pipe(
          Effect.timeout("30 seconds"),
          Effect.catch((error): Effect.Effect<never, SessionGone | RuntimeFailed> =>
            current?.live === live
              ? Effect.fail(new RuntimeFailed({ detail: String(error) }))
              : Effect.fail(new SessionGone())
          )
        )
      })

    return Session.of({
      // Relayed traffic (CDP, PTY, commands) is not entity activity: the request in flight holds the
      // entity. Forked, so the entity's other requests (Close first) are not queued behind it.
      Start: () =>
        Rpc.fork(
          start.pipe(
            Effect.andThen(Effect.suspend(() => (current ? Deferred.await(current.ended) : Effect.void)))
          )
        ),
      Close: ({ payload }) => end("closed", payload.reason, payload.closedBy),
      Screenshot: () =>
        Rpc.fork(
          withRuntime(({ runtime }) =>
            runtime.kind === "browser"
              ? Effect.tryPromise(() => Cdp.screenshot(runtime.browser.control, runtime.contextId))
              : Effect.die(new Error("a screenshot of a sandbox"))
          )
        ),
      Resize: ({ payload }) =>
        Rpc.fork(withRuntime(({ runtime }) => runtime.resize(payload.width, payload.height))),
      // The page's refusal is the caller's answer, not a failed runtime: it passes through.
      Drive: ({ payload }) =>
        Rpc.fork(
          withRuntime(({ runtime }) =>
            runtime.kind === "browser"
              ? Effect.tryPromise(() =>
                  PageActions.onFrontPage(runtime.browser.control, runtime.contextId, payload.action).then(
                    (value) => ({ ok: true as const, value: value as Schema.Json }),
                    (error: unknown) => {
                      if (error instanceof PageActions.PageActionFailed) return { ok: false as const, error }
                      throw error
                    }
                  )
                )
              : Effect.die(new Error("a page action in a sandbox"))
          ).pipe(
            Effect.flatMap((outcome) =>
              outcome.ok ? Effect.succeed(outcome.value) : Effect.fail(outcome.error)
            )
          )
        )
    })
  }),
  { maxIdleTime: "1 minute" }
)

/** How long a message may wait for its node before the row is read: is the session still open? */
const ROW_CHECK_AFTER = "1 second"

/**
 * What the rest of the service may ask of a session's actor, by the
 * session's address (the row's `node_id`). Keeps `effect/cluster` (unstable)
 * behind one file.
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
