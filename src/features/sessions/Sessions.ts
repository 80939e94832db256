import { Context, Effect, Layer, Option, type Schema, type Scope } from "effect"
import type { PageAction, PageActionFailed } from "../../runtime/Drive.ts"
import { PublicUrls } from "../../platform/config/Config.ts"
import {
  type InvalidField,
  type InvalidRequest,
  SessionNotFound,
  type SessionNotOpen,
  type SessionNotReady,
  type SessionTypeMismatch
} from "../../kernel/Errors.ts"
import {
  type CreateSessionRequest,
  type ListSessionsRequest,
  PAGE_SIZE_DEFAULT,
  type PreviewToken,
  type ResizeRequest,
  type Session,
  type SessionCreated,
  type SessionList
} from "../../kernel/Session.ts"
import { isSessionId } from "../../kernel/Ids.ts"
import type { RecordingInfo } from "../../kernel/Recording.ts"
import type { SessionAddress } from "../../platform/cluster/SessionAddress.ts"
import type { ComputerAnswer, ComputerRequest, OutOfViewport } from "../../kernel/Computer.ts"
import type { BulkTerminateRequest, BulkTerminateResult } from "../../kernel/Sandbox.ts"
import { Recordings } from "../recordings/Recordings.ts"
import { LiveSessions } from "../../runtime/LiveSessions.ts"
import { SessionKinds } from "../../runtime/SessionKinds.ts"
import * as BulkTerminate from "./BulkTerminate.ts"
import * as CreateSession from "./CreateSession.ts"
import * as SessionControls from "./SessionControls.ts"
import type { Owner } from "../../kernel/Owner.ts"
import * as SessionView from "./SessionView.ts"
import { type Cursor, type SessionRow, SessionsRepo } from "./SessionsRepo.ts"
import * as SessionConnections from "./SessionConnections.ts"
import type {
  ConnectError,
  ConnectionKind,
  RuntimeFor,
  SessionConnection,
  Whereabouts
} from "./SessionConnections.ts"

export {
  type ConnectionKind,
  PURPOSES,
  READY_WAIT,
  type RuntimeFor,
  type SessionConnection,
  type Whereabouts
} from "./SessionConnections.ts"

/**
 * The session use cases, with or without HTTP: a library host calls these
 * directly with the owner it has authenticated itself.
 */
export class Sessions extends Context.Service<
  Sessions,
  {
    readonly create: (
      owner: Owner,
      input: CreateSessionRequest,
      options?: CreateSession.CreateOptions
    ) => Effect.Effect<SessionCreated, CreateSession.CreateError>
    /** `create`, saying whether the answer is the replay of an earlier request with the same key. */
    readonly createIdempotent: (
      owner: Owner,
      input: CreateSessionRequest,
      options?: CreateSession.CreateOptions
    ) => Effect.Effect<
      { readonly session: SessionCreated; readonly replayed: boolean },
      CreateSession.CreateError
    >
    readonly get: (owner: Owner, id: string) => Effect.Effect<Session, SessionNotFound>
    readonly list: (owner: Owner, input: ListSessionsRequest) => Effect.Effect<SessionList, InvalidField>
    readonly close: (owner: Owner, id: string) => Effect.Effect<void, SessionNotFound | SessionNotOpen>
    /** Ends the named open sessions (or all), each as a DELETE would, with `bulk_terminate`. */
    readonly bulkTerminate: (
      owner: Owner,
      input: BulkTerminateRequest
    ) => Effect.Effect<BulkTerminateResult, InvalidField | InvalidRequest>
    readonly screenshot: (
      owner: Owner,
      id: string
    ) => Effect.Effect<Uint8Array, SessionNotFound | SessionNotReady | SessionNotOpen | SessionTypeMismatch>
    /** An action on a browser session's front page, run where the session runs (`PageActions`). */
    readonly drive: (
      owner: Owner,
      id: string,
      action: PageAction
    ) => Effect.Effect<
      Schema.Json,
      SessionNotFound | SessionNotReady | SessionNotOpen | SessionTypeMismatch | PageActionFailed
    >
    /** Computer-use input on a browser session's page in front (`POST /v1/sessions/{id}/computer`). */
    readonly computer: (
      owner: Owner,
      id: string,
      request: ComputerRequest
    ) => Effect.Effect<
      ComputerAnswer,
      SessionNotFound | SessionNotReady | SessionNotOpen | SessionTypeMismatch | InvalidField | OutOfViewport
    >
    readonly previewToken: (
      owner: Owner,
      id: string
    ) => Effect.Effect<PreviewToken, SessionNotFound | SessionNotReady | SessionNotOpen | SessionTypeMismatch>
    readonly resize: (
      owner: Owner,
      id: string,
      size: ResizeRequest
    ) => Effect.Effect<
      void,
      InvalidField | InvalidRequest | SessionNotFound | SessionNotReady | SessionNotOpen
    >
    /**
     * The one door to a live session: applies not-found, not-open and the
     * kind the connection needs, waits (up to 30 s) while the session is
     * `creating`, and holds what the connection holds (a lease, a viewer's
     * place) until the caller's scope closes.
     */
    readonly connect: <K extends ConnectionKind>(
      owner: Owner,
      id: string,
      kind: K
    ) => Effect.Effect<SessionConnection<RuntimeFor<K>>, SessionNotFound | ConnectError<K>, Scope.Scope>
    /**
     * `connect` right after `locate` answered Here, which read the row and
     * applied its checks: waits for the runtime and holds the lease, without
     * reading the row again.
     */
    readonly connectLocated: <K extends ConnectionKind>(
      owner: Owner,
      id: string,
      kind: K
    ) => Effect.Effect<SessionConnection<RuntimeFor<K>>, ConnectError<K>, Scope.Scope>
    /**
     * Which node runs the session: applies not-found, not-open and the kind,
     * and waits (up to 30 s) while it is `creating` until its runtime is live
     * here or its row names another node.
     */
    readonly locate: (
      owner: Owner,
      id: string,
      kind: ConnectionKind
    ) => Effect.Effect<Whereabouts, SessionNotFound | ConnectError<never>>
    /**
     * Which node holds what a session left (a browser's downloads), whether
     * it is open or ended: the node that ran it. Applies not-found and the kind.
     */
    readonly locateKept: (
      owner: Owner,
      id: string,
      kind: ConnectionKind
    ) => Effect.Effect<Whereabouts, SessionNotFound | SessionTypeMismatch>
    /**
     * The address of the actor of the owner's session, for a call of `kind`
     * (a sandbox call): applies not-found, not-open and the kind.
     */
    readonly actorFor: (
      owner: Owner,
      id: string,
      kind: ConnectionKind
    ) => Effect.Effect<SessionAddress, SessionNotFound | SessionNotOpen | SessionTypeMismatch>
    /**
     * `connect` for a connection another node relays here, which that node
     * authorized (the node hop's token): no owner check, the same lease.
     */
    readonly connectHere: <K extends ConnectionKind>(
      id: string,
      kind: K
    ) => Effect.Effect<SessionConnection<RuntimeFor<K>>, ConnectError<K>, Scope.Scope>
  }
>()("rbs/sessions/Sessions") {
  static readonly layerNoDeps = Layer.effect(
    Sessions,
    Effect.gen(function* () {
      const config = yield* PublicUrls
      const repo = yield* SessionsRepo
      const liveSessions = yield* LiveSessions
      const recordings = yield* Recordings
      const kinds = yield* SessionKinds

      const cdpUrl = (id: string) => `${config.cdpBase}/sessions/${id}`
      const previewBase = (id: string) => `${config.streamBase}/sessions/${id}/preview`

      const toView = (row: SessionRow, recording: RecordingInfo | null): Session =>
        SessionView.toView(row, kinds.ofRow(row), {
          recording,
          cdpUrl: cdpUrl(row.id),
          gatewayUrl: `${config.publicUrl}/s/${row.id}/`,
          videoUrl: previewBase(row.id),
          // Exact where the browser runs; elsewhere as its owner last flushed them (within a second).
          leases:
            row.status === "ready"
              ? Option.match(liveSessions.get(row.id), {
                  onNone: () => row.active_connection_leases,
                  onSome: (live) => live.connections
                })
              : 0
        })

      // An id that is not a session id names no session: no query for it.
      const find = (owner: Owner, id: string) =>
        (isSessionId(id) ? repo.findForAccount(owner.accountId, id) : Effect.succeed(Option.none())).pipe(
          Effect.flatMap(
            Option.match({ onNone: () => Effect.fail(new SessionNotFound()), onSome: Effect.succeed })
          )
        )

      const createIdempotent = yield* CreateSession.make

      const list = Effect.fn("Sessions.list")(function* (owner: Owner, input: ListSessionsRequest) {
        const limit = input.limit ?? PAGE_SIZE_DEFAULT
        const after =
          input.cursor === undefined
            ? Option.none<Cursor>()
            : Option.some(yield* SessionView.decodeCursor(input.cursor))
        const metadata =
          input.metadata === undefined ? undefined : yield* SessionView.decodeMetadataFilter(input.metadata)
        const rows = yield* repo.list(owner.accountId, { limit: limit + 1, after, metadata })
        const page = rows.slice(0, limit)
        const hasMore = rows.length > limit
        const recordingsOf = yield* recordings.views(page)
        return {
          object: "list",
          data: page.map((row) => toView(row, recordingsOf.get(row.id) ?? null)),
          next_cursor: hasMore ? SessionView.encodeCursor(page[page.length - 1]!) : null,
          has_more: hasMore
        } satisfies SessionList
      })

      const { close, screenshot, drive, computer, previewToken, resize } = yield* SessionControls.make(
        find,
        previewBase
      )

      const { connect, connectLocated, connectHere, locate, locateKept, actorFor } =
        yield* SessionConnections.make(find)
      const bulkTerminate = yield* BulkTerminate.make

      return Sessions.of({
        create: (owner, input, options) =>
          Effect.map(createIdempotent(owner, input, options), (r) => r.session),
        createIdempotent,
        get: (owner, id) =>
          Effect.flatMap(find(owner, id), (row) =>
            Effect.map(recordings.views([row]), (views) => toView(row, views.get(row.id) ?? null))
          ),
        list,
        close,
        bulkTerminate,
        screenshot,
        drive,
        computer,
        previewToken,
        resize,
        connect,
        connectLocated,
        locate,
        locateKept,
        actorFor,
        connectHere
      })
    })
  )
}
