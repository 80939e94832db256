import { Deferred, Effect, Option, Result, Schedule, type Scope } from "effect"
import { NodeConfig } from "../../platform/config/Config.ts"
import {
  ConnectionLimitReached,
  ServiceUnavailable,
  SessionNotOpen,
  type SessionNotFound,
  SessionTypeMismatch,
  ViewerLimitReached
} from "../../kernel/Errors.ts"
import type { EndedReason } from "../../kernel/Session.ts"
import type { Owner } from "../../kernel/Owner.ts"
import type { BrowserRuntime, SandboxRuntime, SessionRuntime } from "../../runtime/SessionRuntime.ts"
import { type Capability, offers, SessionKinds } from "../../runtime/SessionKinds.ts"
import { sessionAttributes } from "../../platform/observability/Tracing.ts"
import { LiveSessions, markUsed } from "../../runtime/LiveSessions.ts"
import { type SessionRow, SessionsRepo } from "./SessionsRepo.ts"
import type { SessionAddress } from "../../platform/cluster/SessionAddress.ts"
import { LimitsConfig } from "../limits/LimitsConfig.ts"

/** How long a connect made while the session is `creating` waits for it to be ready. */
export const READY_WAIT = "30 seconds"

/** A live session as `Sessions.connect` hands it out. */
export interface SessionConnection<R extends SessionRuntime = SessionRuntime> {
  readonly sessionId: string
  /** What runs behind the session, on this node. */
  readonly runtime: R
  /** Completes with the reason once the session ends. */
  readonly ended: Effect.Effect<EndedReason>
  /** Why the session ended, if it has. */
  readonly endedReason: Effect.Effect<Option.Option<EndedReason>>
}

/**
 * What a connection is for: the capability it needs of the session's kind
 * (none: the self-test, of any kind), and what it holds while open (one of
 * the session's `active_connection_leases`, one of its viewer places under
 * `LIMIT_VIEWERS_PER_SESSION`, or nothing). A session of a kind without the
 * capability is refused with what its kind says. The node hop carries the
 * purpose too.
 */
export const PURPOSES = {
  cdp: { capability: "cdp", holds: "lease" },
  /** DevTools discovery (`/json/version`, `/json/list`): the browser's facts, read, no connection held. */
  discovery: { capability: "cdp", holds: "nothing" },
  viewer: { capability: "frames", holds: "viewer" },
  /** Exec, commands and their streams, file transfer. */
  sandbox: { capability: "exec", holds: "lease" },
  pty: { capability: "pty", holds: "lease" },
  gateway: { capability: "gateway", holds: "lease" },
  /**
   * The files a browser downloaded: kept on the node that ran the session,
   * while it runs and for `DOWNLOAD_RETENTION_HOURS` after (`locateKept`).
   */
  downloads: { capability: "downloads", holds: "nothing" },
  /** The self-test, of either kind. */
  check: { capability: undefined, holds: "nothing" }
} as const satisfies Record<
  string,
  { readonly capability: Capability | undefined; readonly holds: "lease" | "viewer" | "nothing" }
>

export type ConnectionKind = keyof typeof PURPOSES

/** The runtime that offers each capability today. */
interface RuntimeOffering {
  readonly cdp: BrowserRuntime
  readonly frames: BrowserRuntime
  readonly downloads: BrowserRuntime
  readonly exec: SandboxRuntime
  readonly pty: SandboxRuntime
  readonly gateway: SandboxRuntime
  readonly capture: BrowserRuntime
  readonly drive: BrowserRuntime
}

/** The runtime a connection of this kind reaches. */
export type RuntimeFor<K extends ConnectionKind> = (typeof PURPOSES)[K]["capability"] extends Capability
  ? RuntimeOffering[(typeof PURPOSES)[K]["capability"]]
  : SessionRuntime

/** What a connection of kind `K` may be refused with (a viewer's place only for viewers, the connection limits for what holds a place). */
export type ConnectError<K extends ConnectionKind = ConnectionKind> =
  | SessionNotOpen
  | ServiceUnavailable
  | SessionTypeMismatch
  | (K extends ConnectionKind
      ? (typeof PURPOSES)[K]["holds"] extends "viewer"
        ? ViewerLimitReached | ConnectionLimitReached
        : (typeof PURPOSES)[K]["holds"] extends "lease"
          ? ConnectionLimitReached
          : never
      : never)

/** Where a session's runtime runs, as a connection to it sees it. */
export type Whereabouts =
  | { readonly _tag: "Here" }
  /** On another node, reached at `nodeUrl` through the node hop. */
  | { readonly _tag: "Elsewhere"; readonly nodeUrl: string }

/**
 * A connection's refusals as its kind has them: only a viewer holds a
 * viewer's place, so only a viewer meets `ViewerLimitReached`, and only a
 * viewer or a lease `ConnectionLimitReached` (the purpose decides it at run
 * time, which the types cannot follow).
 */
const onlyViewersLimited = <K extends ConnectionKind, A, E>(
  effect: Effect.Effect<A, E | ConnectError, Scope.Scope>
) => effect as Effect.Effect<A, E | ConnectError<K>, Scope.Scope>

/**
 * The doors to a live session for connections (CDP, the live view, PTYs,
 * commands, files, the gateway):
 * `connect` here with a lease, `locate` which node runs it, `connectHere`
 * for a connection another node relays (see `Sessions`).
 */
export const make = (find: (owner: Owner, id: string) => Effect.Effect<SessionRow, SessionNotFound>) =>
  Effect.gen(function* () {
    const config = yield* NodeConfig
    const limits = yield* LimitsConfig
    const repo = yield* SessionsRepo
    const liveSessions = yield* LiveSessions
    const kinds = yield* SessionKinds
    /**
     * Connections (leases and viewers) held on this node, by account: each holds the node's memory
     * (its frames in flight), so an account's are bounded here as each session's are.
     */
    const accountConnections = new Map<string, number>()

    /** One of the account's places on this node for the caller's scope, or its refusal. */
    const accountPlace = (accountId: string) =>
      (accountConnections.get(accountId) ?? 0) >= limits.connectionsPerAccount
        ? Effect.fail(new ConnectionLimitReached({ of: "account" }))
        : Effect.acquireRelease(
            Effect.sync(() =>
              accountConnections.set(accountId, (accountConnections.get(accountId) ?? 0) + 1)
            ),
            () =>
              Effect.sync(() => {
                const left = (accountConnections.get(accountId) ?? 1) - 1
                if (left > 0) accountConnections.set(accountId, left)
                else accountConnections.delete(accountId)
              })
          )

    /** Whether the session's kind offers what the connection needs; if not, its refusal. */
    const refusalFor = (row: SessionRow, connection: ConnectionKind) => {
      const capability = PURPOSES[connection].capability
      if (capability === undefined) return undefined
      const kind = kinds.ofRow(row)
      return kind.capabilities.has(capability) ? undefined : kind.refusal(capability)
    }

    /** Connections this node has told sessions' logs of: each one's id in the log. */
    let connectionsTold = 0

    const isOpen = (row: SessionRow) => row.status === "creating" || row.status === "ready"

    /** Open, and of the kind the connection needs. */
    const usable = (row: SessionRow, kind: ConnectionKind) => {
      if (!isOpen(row)) return Effect.fail(new SessionNotOpen())
      const refusal = refusalFor(row, kind)
      return refusal === undefined ? Effect.void : Effect.fail(new SessionTypeMismatch({ detail: refusal }))
    }

    /** Waits for the runtime to be live here, then holds what the connection holds for the caller's scope. */
    const attach = Effect.fnUntraced(function* <K extends ConnectionKind>(
      id: string,
      kind: K,
      accountId: string
    ) {
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
      const purpose = PURPOSES[kind]
      // The row said so; the runtime agrees unless the row was read wrong.
      if (purpose.capability !== undefined && !offers(live.runtime, purpose.capability)) {
        const kind = kinds.ofRow({ session_type: live.runtime.kind, isolation: "browser" })
        return yield* new SessionTypeMismatch({ detail: kind.refusal(purpose.capability) })
      }
      if (purpose.holds === "viewer") {
        if (live.viewers >= limits.viewersPerSession) return yield* new ViewerLimitReached()
        yield* accountPlace(accountId)
        yield* Effect.acquireRelease(
          Effect.map(markUsed(live), () => live.viewers++),
          () => Effect.map(markUsed(live), () => live.viewers--)
        )
      } else if (purpose.holds === "lease") {
        if (live.connections >= limits.connectionsPerSession)
          return yield* new ConnectionLimitReached({ of: "session" })
        yield* accountPlace(accountId)
        // The lease: the session's `active_connection_leases` while the caller's scope is open.
        yield* Effect.acquireRelease(
          Effect.map(markUsed(live), () => live.connections++),
          () => Effect.map(markUsed(live), () => live.connections--)
        )
      }
      if (purpose.holds !== "nothing") {
        // In the session's log (when it keeps one): who was connected, from when to when.
        const connectionId = `${kind}_${(++connectionsTold).toString(36)}`
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            const at = Date.now()
            live.log({
              kind: "client_connected",
              at,
              data: { connection: kind, connection_id: connectionId }
            })
            return at
          }),
          (since) =>
            Effect.sync(() => {
              const at = Date.now()
              live.log({
                kind: "client_disconnected",
                at,
                data: { connection: kind, connection_id: connectionId, duration_ms: at - since }
              })
            })
        )
      }
      return {
        sessionId: id,
        runtime: live.runtime as RuntimeFor<K>,
        ended: Deferred.await(live.ended),
        endedReason: Effect.flatMap(Deferred.poll(live.ended), (polled) =>
          Option.isSome(polled) ? Effect.map(polled.value, Option.some) : Effect.succeed(Option.none())
        )
      } satisfies SessionConnection<RuntimeFor<K>>
    })

    const connectSpan = (owner: Owner, id: string, kind: ConnectionKind) =>
      Effect.withSpan("session.connect", {
        attributes: { ...sessionAttributes(id, owner.accountId), "rbs.connection.kind": kind }
      })

    const connect = <K extends ConnectionKind>(owner: Owner, id: string, kind: K) =>
      onlyViewersLimited<K, SessionConnection<RuntimeFor<K>>, SessionNotFound>(
        Effect.gen(function* () {
          const row = yield* find(owner, id)
          yield* usable(row, kind)
          return yield* attach(id, kind, row.account_id)
        }).pipe(connectSpan(owner, id, kind))
      )

    /** `connect` once `locate` answered Here: it read the row and applied its checks; no second read. */
    const connectLocated = <K extends ConnectionKind>(owner: Owner, id: string, kind: K) =>
      onlyViewersLimited<K, SessionConnection<RuntimeFor<K>>, never>(
        attach(id, kind, owner.accountId).pipe(connectSpan(owner, id, kind))
      )

    const connectHere = <K extends ConnectionKind>(id: string, kind: K) =>
      onlyViewersLimited<K, SessionConnection<RuntimeFor<K>>, never>(
        Effect.gen(function* () {
          const row = yield* repo.findById(id)
          if (Option.isNone(row)) return yield* new SessionNotOpen()
          yield* usable(row.value, kind)
          return yield* attach(id, kind, row.value.account_id)
        }).pipe(
          Effect.withSpan("session.connect", {
            attributes: { ...sessionAttributes(id), "rbs.connection.kind": kind, "rbs.relayed": true }
          })
        )
      )

    const elsewhere = (row: SessionRow): Option.Option<Whereabouts> =>
      row.status === "ready" && row.node_id !== config.nodeId && row.node_url !== null
        ? Option.some({ _tag: "Elsewhere", nodeUrl: row.node_url })
        : Option.none()

    /** Reads the row every 100 ms until the session is ready on another node, or no longer open. */
    const readyElsewhere = (id: string) =>
      repo.findById(id).pipe(
        Effect.flatMap((row) =>
          Option.isNone(row) || !isOpen(row.value)
            ? Effect.fail(new SessionNotOpen())
            : Effect.succeed(elsewhere(row.value))
        ),
        // The row was read just before: the first read again comes 100 ms on, as each after it.
        Effect.delay("100 millis"),
        Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: Option.isSome }),
        Effect.map(Option.getOrThrow)
      )

    const locate = Effect.fn("Sessions.locate")(function* (owner: Owner, id: string, kind: ConnectionKind) {
      const row = yield* find(owner, id)
      yield* usable(row, kind)
      const there = elsewhere(row)
      if (Option.isSome(there)) return there.value
      if (row.status === "ready" && row.node_id === config.nodeId) return { _tag: "Here" } as const
      // Creating: its runtime comes up here, or on the node whose runner holds its actor.
      const here = liveSessions.awaitLive(id).pipe(
        Effect.mapError(() => new SessionNotOpen()),
        Effect.as<Whereabouts>({ _tag: "Here" }),
        Effect.ensuring(liveSessions.forget(id))
      )
      const found = yield* Effect.raceFirst(here, readyElsewhere(id)).pipe(Effect.timeoutOption(READY_WAIT))
      if (Option.isNone(found)) return yield* new ServiceUnavailable()
      return found.value
    })

    /**
     * The node that holds what a session left, open or ended: the one that
     * ran it (here when it never ran anywhere: nothing is kept).
     */
    const locateKept = Effect.fn("Sessions.locateKept")(function* (
      owner: Owner,
      id: string,
      kind: ConnectionKind
    ) {
      const row = yield* find(owner, id)
      const refusal = refusalFor(row, kind)
      if (refusal !== undefined) return yield* new SessionTypeMismatch({ detail: refusal })
      return row.node_id === config.nodeId || row.node_url === null
        ? ({ _tag: "Here" } as Whereabouts)
        : ({ _tag: "Elsewhere", nodeUrl: row.node_url } as Whereabouts)
    })

    /**
     * The actor of the owner's session for a call of `kind`: not-found, not-open and the kind
     * applied from the row; the call waits where the session runs, should it still be creating.
     */
    const actorFor = Effect.fn("Sessions.actorFor")(function* (
      owner: Owner,
      id: string,
      kind: ConnectionKind
    ) {
      const row = yield* find(owner, id)
      yield* usable(row, kind)
      return { id: row.id, nodeId: row.node_id } satisfies SessionAddress
    })

    return { connect, connectLocated, connectHere, locate, locateKept, actorFor }
  })
