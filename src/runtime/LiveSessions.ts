import { Clock, Context, Deferred, Effect, Layer, Option } from "effect"
import type { EndedReason } from "../kernel/Session.ts"
import type { SessionRuntime } from "./SessionRuntime.ts"
import { IGNORE, type LogSink } from "./PageLog.ts"

/** A session whose runtime (browser or sandbox) runs in this process. */
export interface LiveSession {
  readonly id: string
  /** The account it belongs to: a request of that account's may reach it without reading the row. */
  readonly accountId: string
  readonly runtime: SessionRuntime
  /** Completes with the reason once the session ends. */
  readonly ended: Deferred.Deferred<EndedReason>
  /** Open client connections (CDP, PTY, command streams, gateway): the session's `active_connection_leases`. */
  connections: number
  /** Open live-view streams. */
  viewers: number
  /**
   * When a client last used the session (epoch ms): a connection or viewer opened or closed, a
   * request (screenshot, action, resize) served. With none open and its runtime not `busy`, the
   * session is idle since then.
   */
  lastUsed: number
  /**
   * The session's log while it keeps one (set by its writer): what happens to the session outside
   * its runtime's pages (a client connecting, the end) is told here.
   */
  log: LogSink
}

/** The session is in use now (`lastUsed`). */
export const markUsed = (session: LiveSession) =>
  Effect.map(Clock.currentTimeMillis, (now) => {
    session.lastUsed = now
  })

/** Since when (epoch ms) nothing has used the session, or `undefined` while something does. */
export const idleSince = (session: LiveSession): number | undefined =>
  session.connections > 0 || session.viewers > 0 || session.runtime.busy?.() === true
    ? undefined
    : session.lastUsed

type Slot = Deferred.Deferred<LiveSession, EndedReason>

/**
 * This node's index of live sessions, written by the Session entities that own
 * them and read by the connections to them: what to reach, and when to hang up. The entity
 * stays the owner; this only points at what it holds.
 */
export class LiveSessions extends Context.Service<
  LiveSessions,
  {
    readonly register: (id: string, accountId: string, runtime: SessionRuntime) => Effect.Effect<LiveSession>
    readonly end: (id: string, reason: EndedReason) => Effect.Effect<void>
    readonly get: (id: string) => Option.Option<LiveSession>
    /** Waits until the session's runtime is live here; fails with the reason if it ends first. */
    readonly awaitLive: (id: string) => Effect.Effect<LiveSession, EndedReason>
    /** Stops waiting for a session that never started here (a waiter timed out). */
    readonly forget: (id: string) => Effect.Effect<void>
  }
>()("rbs/sessions/LiveSessions") {
  static readonly layer = Layer.sync(LiveSessions, () => {
    const slots = new Map<string, Slot>()
    const live = new Map<string, LiveSession>()

    const slot = (id: string) => {
      let existing = slots.get(id)
      if (existing === undefined) {
        existing = Deferred.makeUnsafe<LiveSession, EndedReason>()
        slots.set(id, existing)
      }
      return existing
    }

    const register = (id: string, accountId: string, runtime: SessionRuntime) =>
      Effect.gen(function* () {
        const session: LiveSession = {
          id,
          accountId,
          runtime,
          ended: yield* Deferred.make<EndedReason>(),
          connections: 0,
          viewers: 0,
          lastUsed: yield* Clock.currentTimeMillis,
          log: IGNORE
        }
        live.set(id, session)
        yield* Deferred.succeed(slot(id), session)
        return session
      })

    const end = (id: string, reason: EndedReason) =>
      Effect.gen(function* () {
        const session = live.get(id)
        live.delete(id)
        const waiting = slots.get(id)
        slots.delete(id)
        if (waiting !== undefined) yield* Deferred.fail(waiting, reason)
        if (session !== undefined) yield* Deferred.succeed(session.ended, reason)
      })

    const forget = (id: string) =>
      Effect.sync(() => {
        const waiting = slots.get(id)
        if (waiting !== undefined && !Deferred.isDoneUnsafe(waiting)) slots.delete(id)
      })

    return LiveSessions.of({
      register,
      end,
      get: (id) => Option.fromNullishOr(live.get(id)),
      awaitLive: (id) => Effect.suspend(() => Deferred.await(slot(id))),
      forget
    })
  })
}
