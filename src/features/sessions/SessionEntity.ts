/**
 * The session actor's behaviour: it takes a runtime from its kind's warm pool
 * and marks the row ready (`Start`), watches the TTL, the runtime's exit and
 * the live figures, and ends the session once (`Close`, a watcher, the node
 * stopping). Its messages are `SessionRpcs`; its senders, `SessionActors`.
 */
import {
  Cause,
  Clock,
  Deferred,
  Duration,
  Effect,
  Exit,
  FiberSet,
  Metric,
  Option,
  Redacted,
  Schedule,
  Scope,
  Semaphore
} from "effect"
import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import type { EndedReason } from "../../kernel/Session.ts"
import { SessionKinds } from "../../runtime/SessionKinds.ts"
import { SessionHomes } from "../../runtime/SessionHomes.ts"
import { SessionExtensions } from "./SessionExtensions.ts"
import { SessionImages } from "./SessionImages.ts"
import { Recordings } from "../recordings/Recordings.ts"
import { SessionLogs } from "../logs/SessionLogs.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import { Egress } from "../../platform/net/Egress.ts"
import { Secrets } from "../../platform/crypto/Secrets.ts"
import * as SessionProxy from "./SessionProxy.ts"
import { RuntimePools } from "../../runtime/RuntimePools.ts"
import type { RuntimePool } from "../../runtime/SessionRuntime.ts"
import { idleSince, LiveSessions, type LiveSession, markUsed } from "../../runtime/LiveSessions.ts"
import { EgressMeter } from "./EgressMeter.ts"
import * as RuntimeRequests from "./RuntimeRequests.ts"
import * as SandboxHere from "./SandboxHere.ts"
import { type ClosedBy, SessionLifecycle } from "./SessionLifecycle.ts"
import { readyLatency } from "./SessionMetrics.ts"
import { Session } from "./SessionRpcs.ts"
import { type SessionRow, SessionsRepo } from "./SessionsRepo.ts"
import { sessionAttributes } from "../../platform/observability/Tracing.ts"
import { addressOf } from "../../platform/cluster/SessionAddress.ts"

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
  /** Done once the end is recorded (its row closed and billed): what is written after it waits for it. */
  readonly recorded: Deferred.Deferred<void>
}

/** How often a session's live figures (egress, CDP connections) reach its row. */
export const EGRESS_FLUSH_INTERVAL = "1 second"

/** How often a session with an idle timeout is looked at: it ends within this much past its timeout. */
export const IDLE_CHECK_INTERVAL = "1 second"

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

export const layerEntity = Session.toLayer(
  Effect.gen(function* () {
    const address = yield* Entity.CurrentAddress
    const id = addressOf(address.entityId).id
    const repo = yield* SessionsRepo
    const config = yield* NodeConfig
    const lifecycle = yield* SessionLifecycle
    const pools = yield* RuntimePools
    const kinds = yield* SessionKinds
    const homes = yield* SessionHomes
    const extensionsOf = yield* SessionExtensions
    const imagesOf = yield* SessionImages
    const recordings = yield* Recordings
    const sessionLogs = yield* SessionLogs
    const egress = yield* Egress
    const secretsKey = Redacted.value((yield* Secrets).secretsAtRestKey)
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
            // Cut off now: no byte moves any more. Killing and reaping it is teardown's, off the caller's path.
            if (was !== undefined) yield* was.egress.tap.close
            // No byte moves any more: these are the final figures.
            const counters = was === undefined ? undefined : yield* was.egress.read()
            const ended = yield* lifecycle
              .recordEnded(id, {
                status,
                reason,
                at: yield* now,
                counters,
                closedBy
              })
              .pipe(Effect.ensuring(was === undefined ? Effect.void : Deferred.done(was.recorded, Exit.void)))
            if (Option.isSome(ended)) accountId = ended.value.account_id
            yield* Effect.annotateCurrentSpan({
              ...sessionAttributes(id, accountId),
              "rbs.ended_reason": reason
            })
            // Off the answer's path, once the end is recorded: the session's watchers stop (its TTL,
            // idle check, live figures' flush, log and recorder parts: one ending it meanwhile
            // finds it ended, a flush meanwhile changes no ended row), then its runtime's teardown,
            // a span of the session's too.
            if (was !== undefined)
              yield* FiberSet.run(
                background,
                // It yields first: closing the watchers in place held the answer (1-1.5 ms a DELETE)
                // until the fork returned. Started in place all the same, so no interrupt precedes it.
                Effect.yieldNow.pipe(
                  Effect.andThen(Scope.close(was.watchers, Exit.void)),
                  Effect.andThen(was.pool.retire(was.scope)),
                  Effect.annotateSpans(sessionAttributes(id, accountId)),
                  // The service stopping waits for it: no runtime is left without its teardown.
                  Effect.uninterruptible
                )
              )
            return Option.isSome(ended)
          })
        )
        .pipe(traced("session.end"), Effect.uninterruptible)

    // Watchers live in the runtime's scope; they hand the close to the entity's
    // own fiber set, because closing a scope from a fiber inside it would
    // interrupt the closer.
    const endInBackground = (status: "closed" | "error", reason: EndedReason) =>
      FiberSet.run(background, end(status, reason)).pipe(Effect.asVoid)

    const start = (inserted: SessionRow | undefined) =>
      lock
        .withPermits(1)(
          Effect.gen(function* () {
            const row = inserted === undefined ? yield* repo.findById(id) : Option.some(inserted)
            if (Option.isNone(row) || row.value.status !== "creating" || current !== undefined) return
            accountId = row.value.account_id
            yield* Effect.annotateCurrentSpan(sessionAttributes(id, accountId))
            const stored = row.value.proxy
            const regionName =
              stored === null
                ? egress.region(row.value.region).pipe(Option.getOrElse(() => egress.defaultRegion)).name
                : SessionProxy.OWN_PROXY_REGION
            const pool = pools.of(kinds.ofRow(row.value).kind)
            const scope = yield* Scope.make()
            const workspaceId = row.value.workspace_id
            const persistence = row.value.persistence ?? true
            const acquired = yield* Effect.gen(function* () {
              // The caller's own upstream (its credentials opened: a secrets key changed since the
              // create cannot, and the launch fails), or the region's.
              const route =
                stored === null
                  ? egress.region(row.value.region).pipe(Option.getOrElse(() => egress.defaultRegion))
                  : yield* Effect.try({
                      try: () => SessionProxy.toRegion(secretsKey, stored),
                      catch: (cause) => new Error("cannot open the session's proxy credentials", { cause })
                    })
              const region = row.value.block_ads ? { ...route, blockAds: true } : route
              // On a workspace: its disk (made here if needed), taken for the runtime's scope.
              const home =
                workspaceId === null
                  ? undefined
                  : {
                      dir: yield* homes.mount({ sessionId: id, workspaceId, persistence }),
                      persists: persistence
                    }
              return yield* pool.acquire({
                sessionId: id,
                accountId: row.value.account_id,
                region,
                image: row.value.image,
                accountImage:
                  row.value.image_id === null
                    ? undefined
                    : yield* imagesOf.local(row.value.account_id, row.value.image_id),
                home,
                identity: row.value.identity ?? undefined,
                resources: row.value.resources ?? undefined,
                extensions:
                  row.value.extension_ids.length === 0
                    ? undefined
                    : yield* extensionsOf.unpacked(row.value.account_id, row.value.extension_ids)
              })
            }).pipe(
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
                  proxyRegion: regionName,
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
            const live = yield* liveSessions.register(id, row.value.account_id, runtime)
            const watchers = yield* Scope.make()
            // Served from here on: a request that comes while its watchers start finds the runtime.
            const recorded = yield* Deferred.make<void>()
            current = {
              scope,
              pool,
              watchers,
              live,
              egress: meter,
              ended: yield* Deferred.make<void>(),
              recorded
            }
            // Until the session ends (the watchers close first): the runtime's own work, its log
            // (written whole in the background once it ends), and the recorder of a session that asked
            // for one, encoded in the background once it ends.
            yield* runtime.serve.pipe(Scope.provide(watchers))
            if (row.value.logs && runtime.pageLog !== undefined)
              yield* sessionLogs
                .record(
                  { id, accountId: row.value.account_id },
                  live,
                  runtime.pageLog,
                  Deferred.await(recorded)
                )
                .pipe(Scope.provide(watchers))
            if (row.value.recording && runtime.frames !== undefined)
              yield* recordings
                .record({ id, accountId: row.value.account_id }, runtime.frames)
                .pipe(Scope.provide(watchers))
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
            // Nothing has used it for its idle timeout: no client, viewer or request, no command running.
            const idleTimeout = row.value.idle_timeout_seconds
            if (idleTimeout !== null)
              yield* Effect.gen(function* () {
                const since = idleSince(live)
                // In use (a command running, a client connected): idle at the earliest from now.
                if (since === undefined) return yield* Effect.as(markUsed(live), false)
                if ((yield* Clock.currentTimeMillis) - since < idleTimeout * 1000) return false
                yield* Effect.logInfo("session.idle_timeout", {
                  sessionId: id,
                  idleTimeoutSeconds: idleTimeout
                })
                yield* endInBackground("closed", "idle_timeout")
                return true
              }).pipe(
                Effect.repeat({ until: (ended) => ended, schedule: Schedule.spaced(IDLE_CHECK_INTERVAL) }),
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
              Effect.andThen(runtime.diedOf ?? Effect.undefined),
              Effect.map((reason) => reason ?? runtime.crashReason),
              Effect.tap((reason) =>
                Effect.logWarning(`session.${reason}`, { sessionId: id, pid: runtime.pid })
              ),
              Effect.flatMap((reason) => endInBackground("error", reason)),
              Effect.forkIn(watchers)
            )
          })
        )
        .pipe(traced("session.start"), Effect.uninterruptible)

    // The service is stopping: the runtime dies with it, and the row says so.
    yield* Effect.addFinalizer(() => (current !== undefined ? end("closed", "server_restart") : Effect.void))

    const requests = RuntimeRequests.make(() => current?.live)
    const sandbox = (yield* SandboxHere.make)(id)

    return Session.of({
      // Relayed traffic (CDP, PTY, commands) is not entity activity: the request in flight holds the
      // entity. Forked, so the entity's other requests (Close first) are not queued behind it.
      Start: ({ payload }) =>
        Rpc.fork(
          start(payload.row).pipe(
            Effect.andThen(Effect.suspend(() => (current ? Deferred.await(current.ended) : Effect.void)))
          )
        ),
      Close: ({ payload }) => end("closed", payload.reason, payload.closedBy),
      Screenshot: () => Rpc.fork(requests.screenshot()),
      Resize: ({ payload }) => Rpc.fork(requests.resize(payload.width, payload.height)),
      Drive: ({ payload }) => Rpc.fork(requests.drive(payload.action)),
      // A call in flight holds the entity, as relayed traffic does; each waits (30 s) for a session
      // still creating, as a connection does.
      Exec: ({ payload }) => Rpc.fork(sandbox.exec(payload.caller, payload.input)),
      Commands: ({ payload }) => Rpc.fork(sandbox.commands(payload.caller)),
      Command: ({ payload }) => Rpc.fork(sandbox.command(payload.caller, payload.commandId)),
      Stdin: ({ payload }) => Rpc.fork(sandbox.stdin(payload.caller, payload.commandId, payload.input)),
      Kill: ({ payload }) => Rpc.fork(sandbox.kill(payload.caller, payload.commandId, payload.input)),
      ReadFile: ({ payload }) => Rpc.fork(sandbox.readFile(payload.caller, payload.path)),
      WriteFile: ({ payload }) => Rpc.fork(sandbox.writeFile(payload.caller, payload.path, payload.content)),
      ListFiles: ({ payload }) =>
        Rpc.fork(sandbox.listFiles(payload.caller, payload.path, payload.limit, payload.cursor)),
      StatFile: ({ payload }) => Rpc.fork(sandbox.statFile(payload.caller, payload.path)),
      MakeDirectory: ({ payload }) => Rpc.fork(sandbox.makeDirectory(payload.caller, payload.input)),
      MoveFile: ({ payload }) => Rpc.fork(sandbox.moveFile(payload.caller, payload.input)),
      RemoveFile: ({ payload }) =>
        Rpc.fork(sandbox.removeFile(payload.caller, payload.path, payload.recursive)),
      StartWatch: ({ payload }) => Rpc.fork(sandbox.startWatch(payload.caller, payload.input)),
      Watches: ({ payload }) => Rpc.fork(sandbox.watches(payload.caller)),
      Watch: ({ payload }) => Rpc.fork(sandbox.watch(payload.caller, payload.watchId)),
      StopWatch: ({ payload }) => Rpc.fork(sandbox.stopWatch(payload.caller, payload.watchId)),
      SelfTest: ({ payload }) => Rpc.fork(sandbox.selfTest(payload.caller))
    })
  }),
  { maxIdleTime: "1 minute" }
)
