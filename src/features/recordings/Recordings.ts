import { Cause, Clock, Context, Effect, FiberSet, Layer, Option, Semaphore, type Scope } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as DataDir from "../../platform/files/DataDir.ts"
import { SqlClient } from "effect/sql"
import { Audit } from "../audit/Audit.ts"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import * as Housekeeping from "../../platform/work/Housekeeping.ts"
import { NodeConfig, PublicUrls } from "../../platform/config/Config.ts"
import { RecordingsConfig } from "./RecordingsConfig.ts"
import { RecordingNotFound, RecordingNotReady, SessionNotFound } from "../../kernel/Errors.ts"
import { isSessionId } from "../../kernel/Ids.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { RECORDING_CONTENT_TYPE, type RecordingInfo } from "../../kernel/Recording.ts"
import type { Screencast } from "../../runtime/Frames.ts"
import type { SessionStatus } from "../../kernel/Session.ts"
import { encode } from "./Encoder.ts"
import { type RecordingRow, RecordingsRepo } from "./RecordingsRepo.ts"
import { Spool } from "./Spool.ts"
import type { DrainWait } from "../../platform/cluster/NodeDrain.ts"
import * as Sql from "../../platform/db/Sql.ts"

/** A session as its recording sees it. */
export interface RecordedSession {
  readonly id: string
  readonly status: SessionStatus
  /** Whether it asked to be recorded. */
  readonly recording: boolean
}

/**
 * The account's sessions, as recordings look them up (a recording is its
 * session's, and 404s as it does): the sessions feature implements it, the
 * composition root wires it.
 */
export class RecordedSessions extends Context.Service<
  RecordedSessions,
  {
    readonly find: (accountId: string, sessionId: string) => Effect.Effect<Option.Option<RecordedSession>>
    /** Which of these sessions have ended. */
    readonly ended: (sessionIds: ReadonlyArray<string>) => Effect.Effect<ReadonlySet<string>>
  }
>()("rbs/recordings/RecordedSessions") {}

/** This node's recordings left unfinished (a stop or crash) whose sessions have ended. */
const unfinishedOf = (
  repo: RecordingsRepo["Service"],
  sessions: RecordedSessions["Service"],
  nodeId: string
) =>
  Effect.gen(function* () {
    const rows = yield* repo.unfinishedOnNode(nodeId)
    const ended = yield* sessions.ended(rows.map((row) => row.session_id))
    return rows.filter((row) => ended.has(row.session_id))
  })

/** A draining node waits for its recordings to be encoded (`DrainWaits`). */
export const drainWait = Effect.gen(function* () {
  const repo = yield* RecordingsRepo
  const sessions = yield* RecordedSessions
  return {
    name: "recordings",
    left: (nodeId) => Effect.map(unfinishedOf(repo, sessions, nodeId), (unfinished) => unfinished.length)
  } satisfies DrainWait
})

/** Where a ready recording is: in this node's blob store, or on the node that holds it. */
export type Located =
  | { readonly _tag: "Here"; readonly key: string; readonly bytes: number }
  | { readonly _tag: "Elsewhere"; readonly nodeUrl: string }

export type RecordingError = SessionNotFound | RecordingNotFound | RecordingNotReady

const blobKey = (sessionId: string) => `recordings/${sessionId}.webm`

/**
 * Session recordings: a session created with `recording: true` has its
 * screencast's frames spooled on its node while it runs (`record`, held by
 * the session's actor); when it ends the node encodes them into a WebM in the
 * blob store, one at a time and off every client's path. A stop or crash
 * leaves the spool: the node encodes it when it starts again. Ready videos
 * are kept `RECORDING_RETENTION_DAYS`.
 */
export class Recordings extends Context.Service<
  Recordings,
  {
    /** Records the screencast while the caller's scope is open; when it closes, encodes in the background. */
    readonly record: (
      session: { readonly id: string; readonly accountId: string },
      screencast: Screencast
    ) => Effect.Effect<void, never, Scope.Scope>
    /** The `recording` field of these sessions' views (null for those recorded without). */
    readonly views: (
      rows: ReadonlyArray<RecordedSession>
    ) => Effect.Effect<ReadonlyMap<string, RecordingInfo | null>>
    /** Where the account's session's ready recording is; 404s until it is ready. */
    readonly locate: (owner: Owner, sessionId: string) => Effect.Effect<Located, RecordingError>
    /** A ready recording in this node's store, for another node's hop. */
    readonly locateHere: (sessionId: string) => Effect.Effect<Option.Option<Located & { _tag: "Here" }>>
    readonly remove: (owner: Owner, sessionId: string) => Effect.Effect<void, RecordingError>
  }
>()("rbs/recordings/Recordings") {
  static readonly layerNoDeps = Layer.effect(
    Recordings,
    Effect.gen(function* () {
      const config = { ...(yield* NodeConfig), ...(yield* PublicUrls), ...(yield* RecordingsConfig) }
      const repo = yield* RecordingsRepo
      const sessions = yield* RecordedSessions
      const blobs = yield* BlobStore
      const audit = yield* Audit
      const sql = yield* SqlClient.SqlClient
      const spools = Path.join(config.dataDir, "recordings")
      // Sessions' screens, frame by frame: the service's alone, whatever the umask.
      yield* Effect.promise(() => DataDir.makePrivate(spools))
      const spoolOf = (sessionId: string) => Path.join(spools, sessionId)
      // One encode at a time per node: ffmpeg takes both cores for a moment.
      const encoding = yield* Semaphore.make(1)
      const background = yield* FiberSet.make()
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const finish = (sessionId: string) =>
        encoding.withPermits(1)(
          Effect.gen(function* () {
            const dir = spoolOf(sessionId)
            const output = Path.join(dir, "video.webm")
            const encoded = yield* encode(config.ffmpegPath, dir, output)
            const key = blobKey(sessionId)
            const stored = yield* blobs.putFile(key, output)
            yield* repo.markReady(sessionId, {
              blobKey: key,
              bytes: stored.bytes,
              durationMs: encoded.durationMs,
              at: yield* now
            })
            yield* Effect.logInfo("recording.ready", {
              sessionId,
              bytes: stored.bytes,
              frames: encoded.frames
            })
            yield* Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
          }).pipe(
            Effect.catchTag("EncodeFailed", (failed) =>
              Effect.logWarning("recording.failed", { sessionId, reason: failed.message }).pipe(
                Effect.andThen(repo.markFailed(sessionId, failed.message)),
                Effect.andThen(
                  Effect.promise(() => Fs.rm(spoolOf(sessionId), { recursive: true, force: true }))
                )
              )
            )
          )
        )

      const record = (session: { readonly id: string; readonly accountId: string }, screencast: Screencast) =>
        Effect.gen(function* () {
          yield* repo.insert({
            sessionId: session.id,
            accountId: session.accountId,
            nodeId: config.nodeId,
            nodeUrl: config.nodeUrl,
            contentType: RECORDING_CONTENT_TYPE,
            at: yield* now
          })
          const spool = yield* Effect.acquireRelease(
            Effect.promise(() => Spool.open(spoolOf(session.id))),
            (spool) =>
              Effect.gen(function* () {
                const endedAt = yield* Clock.currentTimeMillis
                yield* Effect.promise(() => spool.close(endedAt))
                yield* repo.markProcessing(session.id, spool.frames)
                yield* FiberSet.run(background, finish(session.id))
              })
          )
          yield* screencast.subscribe((frame) => spool.add(frame))
        })

      const infoOf = (session: RecordedSession, row: RecordingRow | undefined): RecordingInfo | null => {
        if (!session.recording) return null
        const url = `${config.publicUrl}/v1/sessions/${session.id}/recording`
        if (row === undefined) {
          // Not started yet, or never: the session ended before it had a browser.
          const open = session.status === "creating" || session.status === "ready"
          return {
            status: open ? "recording" : "failed",
            url,
            content_type: RECORDING_CONTENT_TYPE,
            frames: 0,
            bytes: null,
            duration_ms: null,
            ready_at: null
          }
        }
        return {
          status: row.status,
          url,
          content_type: row.content_type,
          frames: row.frames,
          bytes: row.bytes === null ? null : Number(row.bytes),
          duration_ms: row.duration_ms === null ? null : Number(row.duration_ms),
          ready_at: row.ready_at
        }
      }

      const views = (rows: ReadonlyArray<RecordedSession>) =>
        Effect.gen(function* () {
          const recorded = rows.filter((row) => row.recording).map((row) => row.id)
          const found = new Map((yield* repo.forSessions(recorded)).map((row) => [row.session_id, row]))
          return new Map(rows.map((row) => [row.id, infoOf(row, found.get(row.id))]))
        })

      /** The account's session's recording row, or the 404 that says why there is none. */
      const readyRow = (owner: Owner, sessionId: string) =>
        Effect.gen(function* () {
          const session = isSessionId(sessionId)
            ? yield* sessions.find(owner.accountId, sessionId)
            : Option.none()
          if (Option.isNone(session)) return yield* new SessionNotFound()
          const row = yield* repo.find(sessionId)
          const open = session.value.status === "creating" || session.value.status === "ready"
          if (Option.isNone(row)) {
            return yield* session.value.recording && open ? new RecordingNotReady() : new RecordingNotFound()
          }
          if (row.value.status === "recording" || row.value.status === "processing") {
            return yield* new RecordingNotReady()
          }
          if (row.value.status === "failed") return yield* new RecordingNotFound()
          return row.value
        })

      const locateHere = (sessionId: string) =>
        Effect.map(blobs.stat(blobKey(sessionId)), (stat) =>
          Option.map(stat, ({ bytes }) => ({ _tag: "Here" as const, key: blobKey(sessionId), bytes }))
        )

      const locate = (owner: Owner, sessionId: string) =>
        Effect.gen(function* () {
          const row = yield* readyRow(owner, sessionId)
          const here = yield* locateHere(sessionId)
          if (Option.isSome(here)) return here.value as Located
          if (row.node_id !== config.nodeId && row.node_url !== null) {
            return { _tag: "Elsewhere", nodeUrl: row.node_url } as Located
          }
          yield* Effect.logWarning("recording.missing", { sessionId, key: row.blob_key })
          return yield* new RecordingNotFound()
        })

      const remove = (owner: Owner, sessionId: string) =>
        Effect.gen(function* () {
          const row = yield* readyRow(owner, sessionId)
          // Each node clears its own copy; with a shared store the one copy goes.
          yield* blobs.remove(blobKey(sessionId))
          yield* Effect.gen(function* () {
            yield* repo.remove(sessionId)
            yield* audit.record(owner, {
              action: "session.recording_deleted",
              targetType: "session",
              targetId: sessionId,
              details: { bytes: row.bytes === null ? null : Number(row.bytes) }
            })
          }).pipe(sql.withTransaction, Sql.orDefect)
        })

      // Spools a stop or crash left behind are encoded once their sessions have ended.
      yield* Effect.gen(function* () {
        for (const row of yield* unfinishedOf(repo, sessions, config.nodeId)) {
          const spooled = yield* Effect.promise(() =>
            Fs.stat(spoolOf(row.session_id)).then(
              () => true,
              () => false
            )
          )
          if (spooled) yield* FiberSet.run(background, finish(row.session_id))
          else yield* repo.markFailed(row.session_id, "the node lost the recording's frames")
        }
      }).pipe(
        Effect.catchCause((cause) =>
          Cause.hasInterruptsOnly(cause)
            ? Effect.failCause(cause)
            : Effect.logWarning("recording.recovery_failed", { cause })
        ),
        Effect.forkScoped
      )

      return Recordings.of({ record, views, locate, locateHere, remove })
    })
  )

  /** Deletes this node's ready recordings past `RECORDING_RETENTION_DAYS`, hourly. */
  static readonly layerRetention = Layer.effectDiscard(
    Effect.gen(function* () {
      const config = { ...(yield* NodeConfig), ...(yield* RecordingsConfig) }
      const repo = yield* RecordingsRepo
      const blobs = yield* BlobStore
      const purge = Effect.gen(function* () {
        const cutoff = new Date((yield* Clock.currentTimeMillis) - config.recordingRetentionDays * 86_400_000)
        // Each node purges what it recorded (its blobs, when each node keeps its own).
        const old = yield* repo.readyBefore(config.nodeId, cutoff, 1000)
        for (const row of old) {
          if (row.blob_key !== null) yield* blobs.remove(row.blob_key)
          yield* repo.remove(row.session_id)
        }
        return old.length
      })
      yield* Housekeeping.every(
        { name: "recordings", interval: "1 hour", removed: (recordings) => ({ recordings }) },
        purge
      ).pipe(Effect.forkScoped)
    })
  )
}
