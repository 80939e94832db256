import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import { RecordingNotFound, RecordingNotReady, SessionNotFound } from "../../kernel/Errors.ts"
import { RECORDING_CONTENT_TYPE } from "../../kernel/Recording.ts"

const id = { id: Schema.String }
const errors = [SessionNotFound.Wire, RecordingNotFound.Wire, RecordingNotReady.Wire]

/** A session's recording: the video once it is encoded, and its removal. */
export class RecordingsApi extends HttpApiGroup.make("recordings")
  .add(
    HttpApiEndpoint.get("download", "/v1/sessions/:id/recording", {
      params: id,
      success: Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: RECORDING_CONTENT_TYPE })),
      error: errors
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(
        OpenApi.Description,
        "The session's recording (a session created with `recording: true`): a WebM video (VP9) of its screen, at most 5 frames a second, each frame shown for as long as the page did not change. Answers `Range` requests (206, for seeking players). 404 `recording_not_ready` while the session runs and for the few seconds its recording is encoded after it ends (the session's `recording.status` says which), 404 `recording_not_found` for a session recorded without, one whose recording failed, or one deleted. Recordings are not billed and their download is not egress; they are kept `RECORDING_RETENTION_DAYS` (30)."
      ),
    HttpApiEndpoint.delete("delete", "/v1/sessions/:id/recording", {
      params: id,
      success: HttpApiSchema.NoContent,
      error: errors
    })
      .annotateMerge(requires("sessions.write", "any", audits("session.recording_deleted", "session", "id")))
      .annotate(OpenApi.Description, "Deletes the session's ready recording for good (204).")
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Sessions") {}
