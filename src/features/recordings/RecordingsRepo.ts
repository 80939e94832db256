import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { RecordingStatus } from "../../kernel/Recording.ts"
import * as Sql from "../../platform/db/Sql.ts"

export const RecordingRow = Schema.Struct({
  session_id: Schema.String,
  account_id: Schema.String,
  status: RecordingStatus,
  node_id: Schema.String,
  node_url: Schema.NullOr(Schema.String),
  content_type: Schema.String,
  blob_key: Schema.NullOr(Schema.String),
  frames: Schema.Number,
  bytes: Schema.NullOr(Schema.BigInt),
  duration_ms: Schema.NullOr(Schema.BigInt),
  error: Schema.NullOr(Schema.String),
  created_at: Schema.Date,
  ready_at: Schema.NullOr(Schema.Date)
})
export type RecordingRow = typeof RecordingRow.Type

const decodeRows = Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(RecordingRow)))

export interface NewRecording {
  readonly sessionId: string
  readonly accountId: string
  readonly nodeId: string
  readonly nodeUrl: string
  readonly contentType: string
  readonly at: Date
}

/** SQL for the `recordings` table; failures here are defects. */
export class RecordingsRepo extends Context.Service<
  RecordingsRepo,
  {
    readonly insert: (recording: NewRecording) => Effect.Effect<void>
    readonly find: (sessionId: string) => Effect.Effect<Option.Option<RecordingRow>>
    /** The recordings of these sessions (one query for a page of them). */
    readonly forSessions: (sessionIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<RecordingRow>>
    /** `recording` -> `processing`, with the frames spooled. */
    readonly markProcessing: (sessionId: string, frames: number) => Effect.Effect<void>
    readonly markReady: (
      sessionId: string,
      video: {
        readonly blobKey: string
        readonly bytes: number
        readonly durationMs: number
        readonly at: Date
      }
    ) => Effect.Effect<void>
    readonly markFailed: (sessionId: string, error: string) => Effect.Effect<void>
    /** This node's recordings not yet encoded (their sessions may still run, or have ended). */
    readonly unfinishedOnNode: (nodeId: string) => Effect.Effect<ReadonlyArray<RecordingRow>>
    /** A node's ready recordings older than `before`, oldest first. */
    readonly readyBefore: (
      nodeId: string,
      before: Date,
      limit: number
    ) => Effect.Effect<ReadonlyArray<RecordingRow>>
    readonly remove: (sessionId: string) => Effect.Effect<void>
  }
>()("rbs/recordings/RecordingsRepo") {
  static readonly layer = Layer.effect(
    RecordingsRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const insert = (r: NewRecording) =>
        sql`
          INSERT INTO recordings (session_id, account_id, status, node_id, node_url, content_type, created_at)
          VALUES (${r.sessionId}, ${r.accountId}, 'recording', ${r.nodeId}, ${r.nodeUrl}, ${r.contentType}, ${r.at})
          ON CONFLICT (session_id) DO NOTHING`.pipe(Effect.asVoid)

      const find = (sessionId: string) =>
        sql`SELECT * FROM recordings WHERE session_id = ${sessionId}`.pipe(
          decodeRows,
          Effect.map((rows) => Option.fromNullishOr(rows[0]))
        )

      const forSessions = (sessionIds: ReadonlyArray<string>) =>
        sessionIds.length === 0
          ? Effect.succeed([])
          : sql`SELECT * FROM recordings WHERE session_id IN ${sql.in(sessionIds)}`.pipe(decodeRows)

      const markProcessing = (sessionId: string, frames: number) =>
        sql`
          UPDATE recordings SET status = 'processing', frames = ${frames}
          WHERE session_id = ${sessionId} AND status = 'recording'`.pipe(Effect.asVoid)

      const markReady = (...[sessionId, video]: Parameters<RecordingsRepo["Service"]["markReady"]>) =>
        sql`
          UPDATE recordings SET status = 'ready', blob_key = ${video.blobKey}, bytes = ${video.bytes},
            duration_ms = ${video.durationMs}, ready_at = ${video.at}, error = NULL
          WHERE session_id = ${sessionId}`.pipe(Effect.asVoid)

      const markFailed = (sessionId: string, error: string) =>
        sql`
          UPDATE recordings SET status = 'failed', error = ${error.slice(0, 1000)}
          WHERE session_id = ${sessionId}`.pipe(Effect.asVoid)

      const unfinishedOnNode = (nodeId: string) =>
        sql`
          SELECT * FROM recordings WHERE node_id = ${nodeId} AND status IN ('recording', 'processing')`.pipe(
          decodeRows
        )

      const readyBefore = (nodeId: string, before: Date, limit: number) =>
        sql`
          SELECT * FROM recordings WHERE status = 'ready' AND node_id = ${nodeId} AND ready_at < ${before}
          ORDER BY ready_at LIMIT ${limit}`.pipe(decodeRows)

      const remove = (sessionId: string) =>
        sql`DELETE FROM recordings WHERE session_id = ${sessionId}`.pipe(Effect.asVoid)

      return RecordingsRepo.of(
        Sql.defects({
          insert,
          find,
          forSessions,
          markProcessing,
          markReady,
          markFailed,
          unfinishedOnNode,
          readyBefore,
          remove
        })
      )
    })
  )
}
