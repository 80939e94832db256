import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import { Forbidden, InvalidField, RateLimited, ResourceLimitReached } from "../../kernel/Errors.ts"
import {
  CreateJobRequest,
  JobConflict,
  JobDetail,
  JobInfo,
  JobKindList,
  JobList,
  JobNotFound,
  JobState
} from "../../kernel/Job.ts"
import { PageSizeFromString } from "../../kernel/Session.ts"
import { PerAccountRateLimit, RouteRateLimit } from "../limits/LimitsMiddleware.ts"

const id = { id: Schema.String }

const LIFE = `A job is \`queued\`, then \`running\` on one node (claimed with a lease it renews), then \`succeeded\`, \`failed\` or \`cancelled\`. A failed attempt that may fare better (a page that did not answer, a browser that failed, a node that stopped) is tried again after 10 s, then 1 min (+-10%), 3 attempts in all; one that would fail the same way (a navigation refused, a command that exited non-zero, a zero balance) fails at once. An attempt that found no room for its session (on the node, or the account at its session limits) waits 5 s without counting. A node that stops hands its running jobs to the others at once; one that dies leaves them until its lease (\`JOB_LEASE_SECONDS\`, 60) runs out, and that attempt counts as \`abandoned\`. At most \`LIMIT_CONCURRENT_JOBS\` (4) of an account run at once; the rest wait \`queued\`.`

export class JobsApi extends HttpApiGroup.make("jobs")
  .add(
    HttpApiEndpoint.post("create", "/v1/jobs", {
      payload: CreateJobRequest,
      success: JobInfo.pipe(HttpApiSchema.status(201)),
      error: [InvalidField.Wire, Forbidden.Wire, RateLimited.Wire, ResourceLimitReached.Wire]
    })
      .annotateMerge(requires(null, "any", audits("job.created", "job")))
      .annotate(PerAccountRateLimit, "job_write")
      .annotate(
        OpenApi.Description,
        `Queues a job: \`kind\` (one of \`GET /v1/jobs/kinds\`) and its \`input\`. 400 \`invalid_field\` names \`kind\` for a kind that does not exist, and \`input.<field>\` for input its kind's schema refuses; 403 \`forbidden\` when the key lacks a scope the kind requires; 409 \`resource_limit\` when the account keeps \`LIMIT_JOBS_PER_ACCOUNT\` jobs (default 10,000: queued, running and finished ones until \`JOB_RETENTION_DAYS\`, default 30, after they end) already. Sessions a job makes are billed as any session. ${LIFE}`
      ),
    HttpApiEndpoint.get("list", "/v1/jobs", {
      query: {
        kind: Schema.optionalKey(Schema.String),
        state: Schema.optionalKey(JobState),
        limit: Schema.optionalKey(PageSizeFromString),
        cursor: Schema.optionalKey(Schema.String)
      },
      success: JobList,
      error: InvalidField.Wire
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(
        OpenApi.Description,
        "The active account's jobs, newest first, filtered by `kind` and `state`. `limit` 1 to 100 (default 20); pass `next_cursor` as `cursor` for the next page."
      ),
    HttpApiEndpoint.get("kinds", "/v1/jobs/kinds", { success: JobKindList })
      .annotateMerge(requires(null))
      .annotate(
        OpenApi.Description,
        "Each kind of job with its `input` as JSON Schema and the scopes it needs. A discovery read: no rate-limit headers."
      ),
    HttpApiEndpoint.get("get", "/v1/jobs/:id", { params: id, success: JobDetail, error: JobNotFound.Wire })
      .annotateMerge(requires("sessions.read"))
      .annotate(OpenApi.Description, `A job with its attempts (node, times, outcome). ${LIFE}`),
    HttpApiEndpoint.get("result", "/v1/jobs/:id/result", {
      params: id,
      success: Schema.Uint8Array.pipe(
        HttpApiSchema.asUint8Array({ contentType: "application/octet-stream" })
      ),
      error: [JobNotFound.Wire, JobConflict.Wire]
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(
        OpenApi.Description,
        "The bytes a succeeded job made (its `result_content_type`: a PNG or JPEG, a PDF, the page's HTML, a command's stdout), streamed from the blob store. 409 `job_conflict` while it has none (not succeeded, or a kind that makes no file)."
      ),
    HttpApiEndpoint.post("cancel", "/v1/jobs/:id/cancel", {
      params: id,
      success: JobInfo,
      error: [JobNotFound.Wire, JobConflict.Wire, Forbidden.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires(null, "any", audits("job.cancelled", "job", "id")))
      .annotate(PerAccountRateLimit, "job_write")
      .annotate(
        OpenApi.Description,
        "Cancels a queued or running job at once: it is `cancelled`; a running attempt is interrupted on its node and its session ends. 409 `job_conflict` once it has finished."
      ),
    HttpApiEndpoint.post("retry", "/v1/jobs/:id/retry", {
      params: id,
      success: JobInfo,
      error: [JobNotFound.Wire, JobConflict.Wire, Forbidden.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires(null, "any", audits("job.retried", "job", "id")))
      .annotate(PerAccountRateLimit, "job_write")
      .annotate(
        OpenApi.Description,
        "Queues a failed or cancelled job again, with the same input and a fresh set of 3 attempts (its attempt log keeps the earlier ones). 409 `job_conflict` for a job that is queued, running or succeeded."
      )
  )
  .middleware(RouteRateLimit)
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Jobs") {}
