import { Deferred, Effect, Option, Result } from "effect"
import * as Path from "node:path"
import { ServiceConfig } from "../Config.ts"
import {
  ServiceUnavailable,
  SessionNotOpen,
  type SessionNotFound,
  ViewerLimitReached
} from "../domain/Errors.ts"
import type { EndedReason } from "../domain/Session.ts"
import type { Owner } from "../domain/Owner.ts"
import type { Screencast } from "../liveview/Screencast.ts"
import { LiveSessions } from "./LiveSessions.ts"
import { type SessionRow, SessionsRepo } from "./SessionsRepo.ts"

/** How long a connect made while the session is `creating` waits for it to be ready. */
export const READY_WAIT = "30 seconds"

/** A live session as `Sessions.connect` hands it out. */
export interface SessionConnection {
  readonly sessionId: string
  /** The DevTools endpoint of the session's browser (loopback, on the node that runs it). */
  readonly wsEndpoint: string
  /** Where the session's downloads go (inside its profile, removed with it). */
  readonly downloadsDir: string
  /** Completes with the reason once the session ends. */
  readonly ended: Effect.Effect<EndedReason>
  /** Why the session ended, if it has. */
  readonly endedReason: Effect.Effect<Option.Option<EndedReason>>
  /** The session's screencast (the live view subscribes to it). */
  readonly screencast: Screencast
}

/**
 * What a connection is for, and so what it holds while open: a CDP client
 * holds one of the session's `active_connection_leases`, a live-view viewer
 * one of its viewer places (`LIMIT_VIEWERS_PER_SESSION`).
 */
export type ConnectionKind = "cdp" | "viewer"

export type ConnectError = SessionNotOpen | ServiceUnavailable | ViewerLimitReached

/** Where a session's browser runs, as a connection to it sees it. */
export type Whereabouts =
  | { readonly _tag: "Here" }
  /** On another node, reached at `nodeUrl` through the node hop. */
  | { readonly _tag: "Elsewhere"; readonly nodeUrl: string }

/**
 * The doors to a live session for connections (CDP, the live view):
 * `connect` here with a lease, `locate` which node runs it, `connectHere`
 * for a connection another node relays (see `Sessions`).
 */
export const make = (find: (owner: Owner, id: string) => Effect.Effect<SessionRow, SessionNotFound>) =>
  Effect.gen(function* () {
    const config = yield* ServiceConfig
    const repo = yield* SessionsRepo
    const liveSessions = yield* LiveSessions

    const isOpen = (row: SessionRow) => row.status === "creating" || row.status === "ready"

    /** Waits for the browser to be live here, then holds a lease of its kind for the caller's scope. */
    const attach = Effect.fnUntraced(function* (id: string, kind: ConnectionKind) {
      const waited = yield* liveSessions.awaitLive(id).pipe(
        Effect.timeoutOption(READY_WAIT),
        Effect.result,
        Effect.onInterrupt(() => liveSessions.forget(id))
      )
      if (Result.isFailure(waited)) return yield* new SessionNotOpen()
      if (Option.isNone(waited.success)) {
        yield* liveSessions.forget(id)
        return yield* new ServiceUnavailable()
      }
      const live = waited.success.value
      if (kind === "viewer") {
        if (live.viewers >= config.limits.viewersPerSession) return yield* new ViewerLimitReached()
        yield* Effect.acquireRelease(
          Effect.sync(() => live.viewers++),
          () => Effect.sync(() => live.viewers--)
        )
      } else {
        // The lease: the session's `active_connection_leases` while the caller's scope is open.
        yield* Effect.acquireRelease(
          Effect.sync(() => live.connections++),
          () => Effect.sync(() => live.connections--)
        )
      }
      return {
        sessionId: id,
        wsEndpoint: live.browser.wsEndpoint,
        downloadsDir: Path.join(live.browser.profileDir, "Downloads"),
        ended: Deferred.await(live.ended),
        endedReason: Effect.flatMap(Deferred.poll(live.ended), (polled) =>
          Option.isSome(polled) ? Effect.map(polled.value, Option.some) : Effect.succeed(Option.none())
        ),
        screencast: live.screencast
      } satisfies SessionConnection
    })

    const connect = Effect.fn("Sessions.connect")(function* (
      owner: Owner,
      id: string,
      kind: ConnectionKind = "cdp"
    ) {
      const row = yield* find(owner, id)
      if (!isOpen(row)) return yield* new SessionNotOpen()
      return yield* attach(id, kind)
    })

    const connectHere = Effect.fn("Sessions.connectHere")(function* (
      id: string,
      kind: ConnectionKind = "cdp"
    ) {
      const row = yield* repo.findById(id)
      if (Option.isNone(row) || !isOpen(row.value)) return yield* new SessionNotOpen()
      return yield* attach(id, kind)
    })

    const elsewhere = (row: SessionRow): Option.Option<Whereabouts> =>
      row.status === "ready" && row.node_id !== config.nodeId && row.node_url !== null
        ? Option.some({ _tag: "Elsewhere", nodeUrl: row.node_url })
        : Option.none()

    /** Polls the row until the session is ready on another node, or no longer open. */
    const readyElsewhere = (id: string) =>
      Effect.gen(function* () {
        while (true) {
          yield* Effect.sleep("100 millis")
          const row = yield* repo.findById(id)
          if (Option.isNone(row) || !isOpen(row.value)) return yield* new SessionNotOpen()
          const there = elsewhere(row.value)
          if (Option.isSome(there)) return there.value
        }
      })

    const locate = Effect.fn("Sessions.locate")(function* (owner: Owner, id: string) {
      const row = yield* find(owner, id)
      if (!isOpen(row)) return yield* new SessionNotOpen()
      const there = elsewhere(row)
      if (Option.isSome(there)) return there.value
      if (row.status === "ready" && row.node_id === config.nodeId) return { _tag: "Here" } as const
      // Creating: its browser comes up here, or on the node whose runner holds its actor.
      const here = liveSessions.awaitLive(id).pipe(
        Effect.mapError(() => new SessionNotOpen()),
        Effect.as<Whereabouts>({ _tag: "Here" }),
        Effect.ensuring(liveSessions.forget(id))
      )
      const found = yield* Effect.raceFirst(here, readyElsewhere(id)).pipe(Effect.timeoutOption(READY_WAIT))
      if (Option.isNone(found)) return yield* new ServiceUnavailable()
      return found.value
    })

    return { connect, connectHere, locate }
  })
