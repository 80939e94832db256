import { Schema } from "effect"

export const RecordingStatus = Schema.Literals(["recording", "processing", "ready", "failed"])
export type RecordingStatus = typeof RecordingStatus.Type

/** Recordings are WebM (VP9): every browser plays them, and the dashboard does. */
export const RECORDING_CONTENT_TYPE = "video/webm"

/** A session's recording as GET and list show it (`null` for a session recorded without). */
export const RecordingInfo = Schema.Struct({
  status: RecordingStatus.annotate({
    description:
      "`recording` while the session runs, `processing` while it is encoded after the session ended, `ready` to download, `failed` when it could not be made."
  }),
  url: Schema.String.annotate({
    description: "`GET` it for the video once `ready` (the same credentials as the session)."
  }),
  content_type: Schema.String,
  frames: Schema.Number,
  bytes: Schema.NullOr(Schema.Number),
  duration_ms: Schema.NullOr(Schema.Number),
  ready_at: Schema.NullOr(Schema.DateFromString)
})
export type RecordingInfo = typeof RecordingInfo.Type
