import { Schema } from "effect"
import { wire } from "./ApiError.ts"

export const JOB_STATES = ["queued", "running", "succeeded", "failed", "cancelled"] as const
export const JobState = Schema.Literals(JOB_STATES)
export type JobState = typeof JobState.Type

/** Why a job failed, or why its last attempt did: a code a program can branch on, and words. */
export const JobError = Schema.Struct({
  code: Schema.String.annotate({
    description:
      "`navigation_failed`, `timeout`, `command_failed`, `capacity_exhausted`, `runtime_failed`, `abandoned` (the node running it stopped), `cancelled`, `payment_required`, `session_type_unavailable` (no node of the service runs the session kind the job needs), `invalid_input`, or a kind's own."
  }),
  message: Schema.String
})
export type JobError = typeof JobError.Type

/** A job (their fields follow the sessions' and webhook deliveries' conventions). */
export const JobInfo = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("job"),
  kind: Schema.String,
  state: JobState,
  input: Schema.Unknown,
  attempts: Schema.Number.annotate({ description: "Attempts started so far." }),
  attempt_limit: Schema.Number.annotate({
    description: "Attempts it may take before it fails for good; a retry raises it."
  }),
  next_attempt_at: Schema.NullOr(Schema.DateFromString).annotate({
    description: "When a queued job runs next (a retry's wait), or null."
  }),
  session_id: Schema.NullOr(Schema.String).annotate({
    description: "The session its latest attempt ran in, if it made one (billed as any session)."
  }),
  result: Schema.NullOr(Schema.Unknown).annotate({
    description: "What a succeeded job answers (its kind says what); the bytes it made are at `result_url`."
  }),
  result_url: Schema.NullOr(Schema.String),
  result_content_type: Schema.NullOr(Schema.String),
  result_bytes: Schema.NullOr(Schema.Number),
  error: Schema.NullOr(JobError),
  created_at: Schema.DateFromString,
  started_at: Schema.NullOr(Schema.DateFromString),
  finished_at: Schema.NullOr(Schema.DateFromString),
  updated_at: Schema.DateFromString
})
export type JobInfo = typeof JobInfo.Type

/** One attempt: where and when it ran and how it ended. */
export const JobAttempt = Schema.Struct({
  number: Schema.Number,
  node_id: Schema.String,
  started_at: Schema.DateFromString,
  finished_at: Schema.NullOr(Schema.DateFromString),
  outcome: Schema.NullOr(
    Schema.Literals(["succeeded", "failed", "cancelled", "abandoned", "interrupted", "deferred"])
  ),
  error: Schema.NullOr(Schema.String)
})
export type JobAttempt = typeof JobAttempt.Type

export const JobDetail = Schema.Struct({
  ...JobInfo.fields,
  attempt_log: Schema.Array(JobAttempt)
})
export type JobDetail = typeof JobDetail.Type

export const JobList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(JobInfo),
  has_more: Schema.Boolean,
  next_cursor: Schema.NullOr(Schema.String)
})

/**
 * `POST /v1/jobs`. `input` is any JSON here (as `Unknown` was in a JSON
 * body): its kind's own schema checks it (`Jobs.create`).
 */
export const CreateJobRequest = Schema.Struct({
  kind: Schema.String,
  input: Schema.optionalKey(Schema.Json)
})
export type CreateJobRequest = typeof CreateJobRequest.Type

export const JobKindInfo = Schema.Struct({
  kind: Schema.String,
  description: Schema.String,
  input_schema: Schema.Unknown.annotate({
    description: "The kind's `input` as JSON Schema (draft 2020-12)."
  }),
  requires: Schema.Array(Schema.String).annotate({
    description: "The scopes a key needs to create a job of this kind."
  })
})

export const JobKindList = Schema.Struct({ kinds: Schema.Array(JobKindInfo) })

export class JobNotFound extends Schema.TaggedError<JobNotFound>()("JobNotFound", {}) {
  readonly status = 404
  readonly code = "job_not_found"
  override readonly message = "Job not found."
  static readonly Wire = wire(this, () => new JobNotFound())
}

/** A cancel of a finished job, a retry of one that has not failed, a result it does not have. */
export class JobConflict extends Schema.TaggedError<JobConflict>()("JobConflict", {
  detail: Schema.String
}) {
  readonly status = 409
  readonly code = "job_conflict"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new JobConflict({ detail: message }))
}
