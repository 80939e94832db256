import { Effect, type Schema } from "effect"
import { type JobAttempt, JobConflict, type JobInfo, type JobState } from "../../kernel/Job.ts"
import type { WebhookEventData } from "../../kernel/Webhook.ts"

/** A row of `jobs` as the driver reads it. */
export interface JobRow {
  readonly id: string
  readonly account_id: string
  readonly owner: unknown
  readonly kind: string
  /** As it was sent: its kind decodes it where it reads it. */
  readonly input: Schema.Json
  readonly state: JobState
  readonly attempts: number
  readonly attempt_limit: number
  readonly node_id: string | null
  readonly next_attempt_at: Date | null
  readonly locked_until: Date | null
  readonly locked_by: string | null
  readonly session_id: string | null
  readonly result: unknown
  readonly result_key: string | null
  readonly result_content_type: string | null
  readonly result_bytes: string | number | null
  readonly result_node_id: string | null
  readonly error_code: string | null
  readonly error_message: string | null
  readonly created_at: Date
  readonly started_at: Date | null
  readonly finished_at: Date | null
  readonly updated_at: Date
}

/** An attempt's columns beside its job's, in one read of both (null when the job has none yet). */
export type AttemptColumns =
  | { readonly [K in keyof JobAttempt as `a_${K}`]: JobAttempt[K] }
  | { readonly [K in keyof JobAttempt as `a_${K}`]: null }

/** Where a job's result bytes are fetched: the API's own route, on any node. */
export const resultPath = (id: string) => `/v1/jobs/${id}/result`

/** Where a succeeded job's bytes are: the blob, and the node whose store holds it. */
export interface JobResultBlob {
  readonly key: string
  readonly contentType: string
  readonly bytes: number
  readonly nodeId: string
}

/** The blob of a job's result file; a job without one (not succeeded, or its `result` is all) is a conflict. */
export const resultBlobOf = (row: JobRow): Effect.Effect<JobResultBlob, JobConflict> =>
  row.state !== "succeeded" ||
  row.result_key === null ||
  row.result_content_type === null ||
  row.result_node_id === null
    ? Effect.fail(
        new JobConflict({
          detail:
            row.state === "succeeded"
              ? "The job succeeded without a result file: its `result` is all."
              : `The job has no result: it is ${row.state}.`
        })
      )
    : Effect.succeed({
        key: row.result_key,
        contentType: row.result_content_type,
        bytes: Number(row.result_bytes ?? 0),
        nodeId: row.result_node_id
      })

/** A row as the API shows it (`publicUrl`: the service's base address). */
export const toJobInfo = (row: JobRow, publicUrl: string): JobInfo => ({
  id: row.id,
  object: "job",
  kind: row.kind,
  state: row.state,
  input: row.input,
  attempts: row.attempts,
  attempt_limit: row.attempt_limit,
  next_attempt_at: row.state === "queued" ? row.next_attempt_at : null,
  session_id: row.session_id,
  result: row.state === "succeeded" ? (row.result ?? null) : null,
  result_url:
    row.state === "succeeded" && row.result_key !== null ? `${publicUrl}${resultPath(row.id)}` : null,
  result_content_type: row.state === "succeeded" ? row.result_content_type : null,
  result_bytes: row.state === "succeeded" && row.result_bytes !== null ? Number(row.result_bytes) : null,
  error:
    row.error_code === null || row.state === "succeeded"
      ? null
      : { code: row.error_code, message: row.error_message ?? "" },
  created_at: row.created_at,
  started_at: row.started_at,
  finished_at: row.finished_at,
  updated_at: row.updated_at
})

/** `job.succeeded` / `job.failed`: the job as it finished, without its input. */
export const jobEventData = (row: JobRow): WebhookEventData<"job.succeeded"> => ({
  id: row.id,
  kind: row.kind,
  state: row.state === "succeeded" ? "succeeded" : "failed",
  attempts: row.attempts,
  session_id: row.session_id,
  result: row.state === "succeeded" ? (row.result ?? null) : null,
  result_url: row.state === "succeeded" && row.result_key !== null ? resultPath(row.id) : null,
  error:
    row.state === "succeeded" || row.error_code === null
      ? null
      : { code: row.error_code, message: row.error_message ?? "" },
  created_at: row.created_at.toISOString(),
  finished_at: (row.finished_at ?? row.updated_at).toISOString()
})
