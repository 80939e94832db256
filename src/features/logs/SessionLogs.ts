import {
  Cause,
  Clock,
  Context,
  Deferred,
  Effect,
  Exit,
  FiberSet,
  Layer,
  Option,
  Schedule,
  Scope
} from "effect"
import type { LogEvent } from "../../kernel/SessionLog.ts"
import { MAX_LOG_BYTES, MAX_LOG_EVENTS } from "../../kernel/SessionLog.ts"
import { IGNORE, type LogEntry, type LogSink, type PageLogSource } from "../../runtime/PageLog.ts"
import type { LiveSession } from "../../runtime/LiveSessions.ts"
import * as Housekeeping from "../../platform/work/Housekeeping.ts"
import { type EventQuery, type EventRow, SessionLogsRepo, type StoredEvent } from "./SessionLogsRepo.ts"
import { SessionLogsConfig } from "./SessionLogsConfig.ts"

/** How often a live session's new events are written: the live stream's delay at most, and a write's batch. */
export const FLUSH_INTERVAL = "500 millis"

/** What a page of a session's log holds, as read. */
export interface LogRead {
  readonly events: ReadonlyArray<LogEvent>
  /** Whether more events than the page's match (past its last). */
  readonly more: boolean
  /** Whether the session ended and its log is whole; `false` too for a session that keeps none. */
  readonly complete: boolean
}

const toEvent = (row: EventRow): LogEvent => ({
  id: row.seq,
  at: row.at.toISOString(),
  kind: row.kind as LogEvent["kind"],
  data: row.data as LogEvent["data"]
})

/**
 * Sessions' logs: written by the node that runs a session while it runs (its
 * pages' events and what its live entry is told, in batches every
 * `FLUSH_INTERVAL`, the last once it ends, off the end's path), read by any.
 */
export class SessionLogs extends Context.Service<
  SessionLogs,
  {
    /**
     * Keeps the session's log while the caller's scope is open: what its
     * pages do (`source`, when its runtime has pages) and what `live` is told.
     * When the scope closes the log is told the end (`session_ended`, with
     * the reason) and written whole in the background, once `endRecorded`
     * is done: the session's closing transaction does not share the
     * database and the CPU with the log's last write.
     */
    readonly record: (
      session: { readonly id: string; readonly accountId: string },
      live: LiveSession,
      source: PageLogSource | undefined,
      endRecorded: Effect.Effect<void>
    ) => Effect.Effect<void, never, Scope.Scope>
    /** A page of the session's log, after `query.after`. */
    readonly read: (sessionId: string, query: EventQuery) => Effect.Effect<LogRead>
    /** Bytes of the account's logs, as its storage counts them. */
    readonly usedBytes: (accountId: string) => Effect.Effect<number>
  }
>()("rbs/logs/SessionLogs") {
  static readonly layer = Layer.effect(
    SessionLogs,
    Effect.gen(function* () {
      const repo = yield* SessionLogsRepo
      const config = yield* SessionLogsConfig
      // Final writes run here, past the session's end: the node waits for them when it stops.
      const background = yield* FiberSet.make()
      // Run before the set's own finalizer interrupts them: a stopping node writes its last logs whole.
      yield* Effect.addFinalizer(() =>
        FiberSet.awaitEmpty(background).pipe(Effect.timeout("10 seconds"), Effect.ignore)
      )

      const record = (
        session: { readonly id: string; readonly accountId: string },
        live: LiveSession,
        source: PageLogSource | undefined,
        endRecorded: Effect.Effect<void>
      ) =>
        Effect.gen(function* () {
          let seq = 0
          let bytes = 0
          let truncated = false
          let buffer: Array<StoredEvent> = []

          const push = (kind: string, at: number, data: unknown) => {
            const size = Buffer.byteLength(JSON.stringify(data)) + kind.length + 24
            if (!truncated && (seq >= MAX_LOG_EVENTS - 1 || bytes + size > MAX_LOG_BYTES)) {
              truncated = true
              buffer.push({
                seq: ++seq,
                at: new Date(at),
                kind: "log_truncated",
                data: { events: seq - 1, bytes },
                bytes: 64
              })
            }
            if (truncated && kind !== "session_ended") return
            bytes += size
            buffer.push({ seq: ++seq, at: new Date(at), kind, data, bytes: size })
          }
          const sink: LogSink = (entry: LogEntry) => push(entry.kind, entry.at, entry.data)

          /** Writes what is buffered; a failed write keeps it for the next (the database away a moment). */
          const flush = (expiresAt?: Date) =>
            Effect.suspend(() => {
              if (buffer.length === 0 && expiresAt === undefined) return Effect.void
              const batch = buffer
              buffer = []
              return Effect.flatMap(Clock.currentTimeMillis, (now) =>
                repo.append(session.id, session.accountId, batch, new Date(now), expiresAt)
              ).pipe(
                Effect.catchCause((cause) => {
                  if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
                  buffer = [...batch, ...buffer]
                  return Effect.logWarning("session_log.write_failed", { sessionId: session.id, cause })
                })
              )
            })

          live.log = sink
          const pages = yield* Scope.make()
          // In the background: the session is served while its pages are found (a few round trips).
          if (source !== undefined) yield* source.follow(sink).pipe(Scope.provide(pages), Effect.forkScoped)
          // One writer a log, in the node's background set: a write in flight never holds up the
          // session's end, and the last one (with the log's expiry) comes after every other.
          const ended = yield* Deferred.make<Date>()
          yield* FiberSet.run(
            background,
            Effect.gen(function* () {
              while (!(yield* Deferred.isDone(ended))) {
                yield* flush()
                yield* Effect.raceFirst(Effect.sleep(FLUSH_INTERVAL), Deferred.await(ended))
              }
              const expiresAt = yield* Deferred.await(ended)
              // After the end's own statements: the DELETE that ended it is answered first (it had waited
              // on this write's share of the CPU and the database: +7.8 ms at the median, bench/README.md).
              yield* endRecorded
              // A few retries, then the log stays incomplete (and is swept as stale).
              yield* flush(expiresAt).pipe(
                Effect.andThen(
                  Effect.suspend(() => (buffer.length === 0 ? Effect.void : Effect.fail("unwritten")))
                ),
                Effect.retry({ schedule: Schedule.spaced("1 second"), times: 5 }),
                Effect.ignore
              )
            })
          )

          yield* Effect.addFinalizer(() =>
            Effect.gen(function* () {
              live.log = IGNORE
              // The pages' last events (requests cut off by the end) come first, then the end.
              yield* Scope.close(pages, Exit.void)
              const reason = yield* Deferred.poll(live.ended)
              const endedReason = Option.isSome(reason) ? yield* reason.value : "unknown"
              const now = yield* Clock.currentTimeMillis
              push("session_ended", now, { reason: endedReason })
              yield* Deferred.succeed(ended, new Date(now + config.retentionDays * 86_400_000))
            })
          )
        })

      return SessionLogs.of({
        record,
        read: (sessionId, query) =>
          Effect.gen(function* () {
            const summary = yield* repo.summary(sessionId)
            const rows = yield* repo.events(sessionId, { ...query, limit: query.limit + 1 })
            return {
              events: rows.slice(0, query.limit).map(toEvent),
              more: rows.length > query.limit,
              complete: summary?.complete === true
            }
          }),
        usedBytes: repo.usedBytes
      })
    })
  )

  /** Deletes logs past `SESSION_LOG_RETENTION_DAYS` after their session's end, hourly. */
  static readonly layerRetention = Layer.effectDiscard(
    Effect.gen(function* () {
      const repo = yield* SessionLogsRepo
      const config = yield* SessionLogsConfig
      const purge = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        // An incomplete log (its node lost) unwritten for longer than any session lives, plus its retention.
        const stale = new Date(now - config.retentionDays * 86_400_000 - 2 * 3_600_000)
        return yield* repo.sweep(new Date(now), stale, 1000)
      })
      yield* Housekeeping.every(
        { name: "session_logs", interval: "1 hour", removed: (logs) => ({ logs }) },
        purge
      ).pipe(Effect.forkScoped)
    })
  )
}
