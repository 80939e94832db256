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
import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { BrowserPool } from "../browser/BrowserPool.ts"
import { DEFAULT_HEIGHT, DEFAULT_WIDTH } from "../browser/PoolLauncher.ts"
import { describeDevice } from "../browser/Chromium.ts"
import * as Cdp from "../browser/CdpClient.ts"
import { EndedReason } from "../domain/Session.ts"
import { ServiceConfig } from "../Config.ts"
import * as Screencast from "../liveview/Screencast.ts"
import { Recordings } from "../recordings/Recordings.ts"
import { Egress } from "../egress/Egress.ts"
import { LiveSessions, type LiveSession } from "./LiveSessions.ts"
import { EgressMeter } from "./EgressMeter.ts"
import { ClosedBy, SessionLifecycle } from "./SessionLifecycle.ts"
import { readyLatency } from "./SessionMetrics.ts"
import { SessionsRepo } from "./SessionsRepo.ts"

/** The session has no live browser here (not started yet, or already ended). */
export class SessionGone extends Schema.TaggedError<SessionGone>()("SessionGone", {}) {}

const Start = Rpc.make("Start")
const Close = Rpc.make("Close", {
  payload: { reason: EndedReason, closedBy: Schema.optionalKey(ClosedBy) },
  success: Schema.Boolean
})
const Screenshot = Rpc.make("Screenshot", { success: Schema.Uint8Array, error: SessionGone })
const Resize = Rpc.make("Resize", { payload: { width: Schema.Int, height: Schema.Int }, error: SessionGone })

/**
 * A browser session as an actor: it owns a Scope holding the session's
 * Chromium (taken from the warm pool), its TTL timer and its crash watcher.
 * Closing that scope releases all of them, whatever the reason.
 */
export const Session = Entity.make("Session", [Start, Close, Screenshot, Resize])

interface Current {
  /** The browser and its proxy: closed in the background once the session has ended. */
  readonly scope: Scope.Closeable
  /** The TTL timer, the egress flush and the crash watcher: closed first, at once. */
  readonly watchers: Scope.Closeable
  readonly live: LiveSession
  readonly egress: EgressMeter
}

/** How often a session's live figures (egress, CDP connections) reach its row. */
export const EGRESS_FLUSH_INTERVAL = "1 second"

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

export const layerEntity = Session.toLayer(
  Effect.gen(function* () {
    const address = yield* Entity.CurrentAddress
    const id = address.entityId
    const repo = yield* SessionsRepo
    const config = yield* ServiceConfig
    const lifecycle = yield* SessionLifecycle
    const pool = yield* BrowserPool
    const egress = yield* Egress
    const liveSessions = yield* LiveSessions
    const recordings = yield* Recordings
    const lock = yield* Semaphore.make(1)
    const background = yield* FiberSet.make()
    let current: Current | undefined
    // Relayed CDP traffic is not entity activity: hold the entity while its browser lives.
    const keepAlive = (enabled: boolean) =>
      Entity.keepAlive(enabled).pipe(Effect.provideService(Entity.CurrentAddress, address))

    const end = (status: "closed" | "error", reason: EndedReason, closedBy?: ClosedBy) =>
      lock
        .withPermits(1)(
          Effect.gen(function* () {
            const was = current
            current = undefined
            // Relays learn the reason before the browser dies under them.
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
            if (was !== undefined) yield* pool.retire(was.scope)
            yield* keepAlive(false)
            return Option.isSome(ended)
          })
        )
        .pipe(Effect.uninterruptible)

    // Watchers live in the browser's scope; they hand the close to the entity's
    // own fiber set, because closing a scope from a fiber inside it would
    // interrupt the closer.
    const endInBackground = (status: "closed" | "error", reason: EndedReason) =>
      FiberSet.run(background, end(status, reason)).pipe(Effect.asVoid)

    const start = lock
      .withPermits(1)(
        Effect.gen(function* () {
          const row = yield* repo.findById(id)
          if (Option.isNone(row) || row.value.status !== "creating" || current !== undefined) return
          const region = egress.region(row.value.region).pipe(Option.getOrElse(() => egress.defaultRegion))
          const scope = yield* Scope.make()
          const acquired = yield* pool.acquire({ region }).pipe(Scope.provide(scope), Effect.exit)
          if (Exit.isFailure(acquired)) {
            yield* Scope.close(scope, Exit.void)
            yield* Effect.logError("session.launch_failed", { sessionId: id, cause: acquired.cause })
            yield* lifecycle.recordEnded(id, { status: "error", reason: "launch_failed", at: yield* now })
            yield* liveSessions.end(id, "launch_failed")
            return
          }
          const { browser } = acquired.value
          const meter = new EgressMeter(acquired.value.egress)
          const readyAt = yield* now
          const ready = yield* (
            lifecycle
              .recordReady(id, {
                at: readyAt,
                device: describeDevice(browser.product, DEFAULT_WIDTH, DEFAULT_HEIGHT),
                proxyRegion: region.name,
                nodeId: config.nodeId,
                nodeUrl: config.nodeUrl
              })
              // The browser is ours now: if the ready transition fails, it must not outlive it.
              .pipe(Effect.onError(() => Scope.close(scope, Exit.void)))
          )
          if (Option.isNone(ready)) {
            // Ended (deleted, expired) while we were taking the browser.
            yield* Scope.close(scope, Exit.void)
            return
          }
          // The browser's own: stopped when its scope closes, before the browser is killed.
          const screencast = yield* Screencast.make(browser.control).pipe(Scope.provide(scope))
          const live = yield* liveSessions.register(id, browser, screencast)
          const watchers = yield* Scope.make()
          // Recorded until the session ends (the watchers close first), then encoded in the background.
          if (row.value.recording) {
            yield* recordings
              .record({ id, accountId: row.value.account_id }, screencast)
              .pipe(Scope.provide(watchers))
          }
          current = { scope, watchers, live, egress: meter }
          yield* keepAlive(true)
          yield* Metric.update(readyLatency, (readyAt.getTime() - row.value.created_at.getTime()) / 1000)
          yield* Effect.logInfo("session.ready", { sessionId: id, pid: browser.pid })

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
          yield* Deferred.await(browser.exited).pipe(
            Effect.andThen(Effect.logWarning("session.browser_crashed", { sessionId: id, pid: browser.pid })),
            Effect.andThen(endInBackground("error", "browser_crashed")),
            Effect.forkIn(watchers)
          )
        })
      )
      .pipe(Effect.uninterruptible)

    // The service is stopping: the browser dies with it, and the row says so.
    yield* Effect.addFinalizer(() => (current !== undefined ? end("closed", "server_restart") : Effect.void))

    const withBrowser = <A>(f: (live: LiveSession) => Promise<A>) =>
      Effect.suspend(() => {
        const live = current?.live
        if (live === undefined) return Effect.fail(new SessionGone())
        return Effect.tryPromise(() => f(live)).pipe(
          Effect.timeout("30 seconds"),
          Effect.catch((error) =>
            current?.live === live ? Effect.die(error) : Effect.fail(new SessionGone())
          )
        )
      })

    return Session.of({
      Start: () => start,
      Close: ({ payload }) => end("closed", payload.reason, payload.closedBy),
      Screenshot: () => Rpc.fork(withBrowser((live) => Cdp.screenshot(live.browser.control))),
      Resize: ({ payload }) =>
        Rpc.fork(
          withBrowser((live) =>
            Cdp.resize(live.browser.control, payload.width, payload.height, live.browser.frameHeight)
          )
        )
    })
  }),
  { maxIdleTime: "1 minute" }
)

/**
 * What the rest of the service may ask of a session's actor. Keeps
 * `effect/cluster` (unstable) behind one file.
 */
export class SessionActors extends Context.Service<
  SessionActors,
  {
    /** Fire and forget: the entity takes a browser and marks the row ready. */
    readonly start: (id: string) => Effect.Effect<void>
    /** True when this call ended the session; `closedBy` is audited with the change. */
    readonly close: (id: string, reason: EndedReason, closedBy?: ClosedBy) => Effect.Effect<boolean>
    readonly screenshot: (id: string) => Effect.Effect<Uint8Array, SessionGone>
    readonly resize: (id: string, width: number, height: number) => Effect.Effect<void, SessionGone>
  }
>()("rbs/sessions/SessionActors") {
  static readonly layer = Layer.effect(
    SessionActors,
    Effect.gen(function* () {
      const clientFor = yield* Session.client
      return SessionActors.of({
        start: (id) => clientFor(id).Start(undefined, { discard: true }).pipe(Effect.orDie),
        close: (id, reason, closedBy) =>
          clientFor(id)
            .Close(closedBy === undefined ? { reason } : { reason, closedBy })
            .pipe(Effect.orDie),
        screenshot: (id) =>
          clientFor(id)
            .Screenshot()
            .pipe(
              Effect.catchTag(
                ["MailboxFull", "AlreadyProcessingMessage", "PersistenceError", "EntityNotAssignedToRunner"],
                Effect.die
              )
            ),
        resize: (id, width, height) =>
          clientFor(id)
            .Resize({ width, height })
            .pipe(
              Effect.catchTag(
                ["MailboxFull", "AlreadyProcessingMessage", "PersistenceError", "EntityNotAssignedToRunner"],
                Effect.die
              )
            )
      })
    })
  )
}
