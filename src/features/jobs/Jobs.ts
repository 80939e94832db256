import { Clock, Context, Duration, Effect, Layer, Option, Schedule, Schema } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import { newestFirst } from "../../platform/db/Paging.ts"
import { PublicUrls } from "../../platform/config/Config.ts"
import { Forbidden, InvalidField, type ResourceLimitReached } from "../../kernel/Errors.ts"
import {
  type CreateJobRequest,
  JobConflict,
  type JobDetail,
  type JobInfo,
  JobNotFound,
  type JobState
} from "../../kernel/Job.ts"
import { type Owner, OwnerSchema, permits } from "../../kernel/Owner.ts"
import { decodeInput } from "../../kernel/Validation.ts"
import { AccountBounds } from "../limits/AccountBounds.ts"
import { WorkspaceNodes } from "./JobSession.ts"
import { JobsConfig } from "./JobsConfig.ts"
import { CANCEL_CHANNEL, WAKE_CHANNEL } from "./JobEngine.ts"
import { JobKinds } from "./JobKinds.ts"
import { ATTEMPT_LIMIT } from "./JobQueue.ts"
import { type AttemptColumns, type JobResultBlob, type JobRow, resultBlobOf, toJobInfo } from "./JobRows.ts"

/** A job waited for is looked at often at first (most finish within a second): 25 ms more each time, then every second. */
const LOOKS = Schedule.spaced("25 millis").pipe(
  Schedule.modifyDelay(({ attempt }) =>
    Effect.succeed(Duration.millis(Math.min(1000, 25 * Math.max(1, attempt))))
  )
)

const encodeOwner = Schema.encodeSync(OwnerSchema)

export interface JobQuery {
  readonly kind?: string | undefined
  readonly state?: JobState | undefined
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

const FINISHED: ReadonlyArray<JobState> = ["succeeded", "failed", "cancelled"]

/**
 * The job use cases, with or without HTTP: create (the kind's scopes and
 * input checked, queued in one transaction that wakes every node's engine),
 * list, get with its attempts, cancel (at once in the row; the node running
 * it is told to stop), retry (a failed or cancelled job queued again), and
 * where its result is.
 */
export class Jobs extends Context.Service<
  Jobs,
  {
    readonly create: (
      owner: Owner,
      request: CreateJobRequest
    ) => Effect.Effect<JobInfo, InvalidField | Forbidden | ResourceLimitReached>
    readonly list: (
      owner: Owner,
      query: JobQuery
    ) => Effect.Effect<
      { readonly data: ReadonlyArray<JobInfo>; readonly nextCursor: string | null },
      InvalidField
    >
    readonly get: (owner: Owner, id: string) => Effect.Effect<JobDetail, JobNotFound>
    readonly cancel: (
      owner: Owner,
      id: string
    ) => Effect.Effect<JobInfo, JobNotFound | JobConflict | Forbidden>
    readonly retry: (
      owner: Owner,
      id: string
    ) => Effect.Effect<JobInfo, JobNotFound | JobConflict | Forbidden>
    readonly result: (owner: Owner, id: string) => Effect.Effect<JobResultBlob, JobNotFound | JobConflict>
    /** Where a job's result is in the blob store, if it has one (the hop's end: the hop vouched for the caller). */
    readonly resultKey: (id: string) => Effect.Effect<string | null>
    /**
     * Queues a job the service itself asks for (a workspace's snapshot, restore
     * or clone), on `nodeId` only when given (where the workspace's disk is),
     * and waits up to `waitMs` for it to finish: the job as it then is. It counts
     * in the account's `LIMIT_JOBS_PER_ACCOUNT` but is never refused by it: the
     * workspace route asking has limits of its own.
     */
    readonly run: (
      owner: Owner,
      kind: string,
      input: Schema.Json,
      options: { readonly nodeId: string | null; readonly waitMs: number }
    ) => Effect.Effect<JobInfo>
  }
>()("rbs/jobs/Jobs") {
  static readonly layer = Layer.effect(
    Jobs,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* Audit
      const kinds = yield* JobKinds
      const workspaceNodes = yield* WorkspaceNodes
      const { publicUrl } = yield* PublicUrls
      const bounds = yield* AccountBounds
      const { jobRetentionDays } = yield* JobsConfig
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))
      const info = (row: JobRow) => toJobInfo(row, publicUrl)

      /** A key needs every scope the kind names (its sessions, its commands). */
      const allowed = (owner: Owner, kind: string) => {
        const found = kinds.get(kind)
        return found === undefined || found.requires.every((scope) => permits(owner, scope))
          ? Effect.void
          : Effect.fail(new Forbidden())
      }

      const create = Effect.fn("Jobs.create")(function* (owner: Owner, request: CreateJobRequest) {
        const kind = kinds.get(request.kind)
        if (kind === undefined || kind.internal === true) return yield* new InvalidField({ field: "kind" })
        yield* allowed(owner, kind.kind)
        const input = request.input ?? {}
        // The kind's boundary: its input is kept as the JSON it was sent as, and each attempt decodes it again.
        const decoded = yield* decodeInput(kind.input)(input).pipe(
          Effect.mapError((error) =>
            error._tag === "InvalidField" && error.field !== ""
              ? new InvalidField({ field: `input.${error.field}` })
              : new InvalidField({ field: "input" })
          )
        )
        const selector = kind.workspace?.(decoded)
        return yield* enqueue(
          owner,
          kind.kind,
          input,
          selector === undefined ? null : yield* diskNode(owner, selector),
          bounds.reserve(
            "jobs",
            owner.accountId,
            sql<{
              readonly n: number
            }>`SELECT count(*)::int AS n FROM jobs WHERE account_id = ${owner.accountId}`.pipe(
              Effect.map((rows) => rows[0]?.n ?? 0),
              Sql.orDefect
            ),
            `finished ones are deleted ${jobRetentionDays} days after they end`
          )
        )
      })

      /** Where the workspace's disk is while its node lives (else any node: made there from its snapshots). */
      const diskNode = (owner: Owner, selector: string) =>
        Effect.flatMap(workspaceNodes.locate(owner, selector), (found) =>
          Option.isSome(found)
            ? Effect.succeed(found.value)
            : Effect.fail(new InvalidField({ field: "input.workspace" }))
        )

      /** Inserts a queued job (audited) and wakes every node's engine on commit; `admit` first, in its transaction. */
      const enqueue = <E>(
        owner: Owner,
        kind: string,
        input: Schema.Json,
        nodeId: string | null,
        admit: Effect.Effect<void, E>
      ) =>
        Effect.gen(function* () {
          const at = yield* now
          const id = `job_${Crypto.randomUUID()}`
          return yield* sql.withTransaction(
            Effect.gen(function* () {
              yield* admit
              const rows = yield* sql<JobRow>`
                INSERT INTO jobs (id, account_id, owner, kind, input, state, attempt_limit, node_id,
                  next_attempt_at, created_at, updated_at)
                VALUES (${id}, ${owner.accountId}, ${JSON.stringify(encodeOwner(owner))}::jsonb, ${kind},
                  ${JSON.stringify(input)}::jsonb, 'queued', ${ATTEMPT_LIMIT}, ${nodeId}, ${at}, ${at}, ${at})
                RETURNING *`
              yield* audit.record(owner, {
                action: "job.created",
                targetType: "job",
                targetId: id,
                details: { kind }
              })
              yield* sql`SELECT pg_notify(${WAKE_CHANNEL}, '')`
              return info(rows[0]!)
            })
          )
        }).pipe(Effect.catchTag("SqlError", Effect.die))

      const run = (
        owner: Owner,
        kind: string,
        input: Schema.Json,
        options: { readonly nodeId: string | null; readonly waitMs: number }
      ) =>
        Effect.gen(function* () {
          const queued = yield* enqueue(owner, kind, input, options.nodeId, Effect.void)
          const look = sql<JobRow>`SELECT * FROM jobs WHERE id = ${queued.id}`.pipe(
            Sql.orDefect,
            Effect.map((rows) => rows[0]!)
          )
          const finished = yield* look.pipe(
            Effect.repeat({ until: (row) => FINISHED.includes(row.state), schedule: LOOKS }),
            Effect.timeoutOption(options.waitMs)
          )
          // Not finished in time: as it is now.
          return info(Option.isSome(finished) ? finished.value : yield* look)
        })

      const list = Effect.fn("Jobs.list")(function* (owner: Owner, query: JobQuery) {
        const filters = [
          sql`account_id = ${owner.accountId}`,
          ...(query.kind === undefined ? [] : [sql`kind = ${query.kind}`]),
          ...(query.state === undefined ? [] : [sql`state = ${query.state}`])
        ]
        const page = yield* newestFirst(
          sql,
          { cursor: query.cursor, limit: query.limit ?? 20 },
          ({ after, orderAndLimit }) =>
            sql<JobRow>`SELECT * FROM jobs WHERE ${sql.and([...filters, ...after])} ${orderAndLimit}`.pipe(
              Sql.orDefect
            )
        )
        return { data: page.rows.map(info), nextCursor: page.nextCursor }
      })

      const find = (owner: Owner, id: string, lock = false) =>
        sql<JobRow>`
          SELECT * FROM jobs WHERE account_id = ${owner.accountId} AND id = ${id}
          ${lock ? sql`FOR UPDATE` : sql``}`.pipe(
          Sql.orDefect,
          Effect.flatMap((rows) =>
            rows[0] === undefined ? Effect.fail(new JobNotFound()) : Effect.succeed(rows[0])
          )
        )

      const get = Effect.fn("Jobs.get")(function* (owner: Owner, id: string) {
        // One statement, so one snapshot: the job's state and its attempts' outcomes are committed together,
        // and two reads could see an attempt's outcome beside the state from before it.
        const rows = yield* sql<JobRow & AttemptColumns>`
          SELECT j.*, a.number AS a_number, a.node_id AS a_node_id, a.started_at AS a_started_at,
            a.finished_at AS a_finished_at, a.outcome AS a_outcome, a.error AS a_error
          FROM jobs j LEFT JOIN job_attempts a ON a.job_id = j.id
          WHERE j.account_id = ${owner.accountId} AND j.id = ${id} ORDER BY a.number`.pipe(Sql.orDefect)
        const row = rows[0]
        if (row === undefined) return yield* new JobNotFound()
        const attempts = rows.flatMap((a): JobDetail["attempt_log"] =>
          a.a_number === null
            ? []
            : [
                {
                  number: a.a_number,
                  node_id: a.a_node_id,
                  started_at: a.a_started_at,
                  finished_at: a.a_finished_at,
                  outcome: a.a_outcome,
                  error: a.a_error
                }
              ]
        )
        return { ...info(row), attempt_log: attempts }
      })

      const cancel = Effect.fn("Jobs.cancel")(function* (owner: Owner, id: string) {
        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const row = yield* find(owner, id, true)
              yield* allowed(owner, row.kind)
              if (FINISHED.includes(row.state))
                return yield* new JobConflict({ detail: `The job has already finished: it is ${row.state}.` })
              const at = yield* now
              const rows = yield* sql<JobRow>`
                UPDATE jobs SET state = 'cancelled', error_code = 'cancelled', error_message = 'Cancelled.',
                  next_attempt_at = NULL, locked_until = NULL, locked_by = NULL, finished_at = ${at},
                  updated_at = ${at}
                WHERE id = ${id} RETURNING *`
              yield* sql`
                UPDATE job_attempts SET finished_at = ${at}, outcome = 'cancelled', error = 'cancelled'
                WHERE job_id = ${id} AND finished_at IS NULL`
              yield* audit.record(owner, {
                action: "job.cancelled",
                targetType: "job",
                targetId: id,
                details: { kind: row.kind, was: row.state }
              })
              // The node running it hears this on commit and interrupts the attempt (ending its session).
              if (row.state === "running") yield* sql`SELECT pg_notify(${CANCEL_CHANNEL}, ${id})`
              return info(rows[0]!)
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))
      })

      const retry = Effect.fn("Jobs.retry")(function* (owner: Owner, id: string) {
        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const row = yield* find(owner, id, true)
              yield* allowed(owner, row.kind)
              if (row.state !== "failed" && row.state !== "cancelled")
                return yield* new JobConflict({
                  detail: `Only a failed or cancelled job can be retried: this one is ${row.state}.`
                })
              const at = yield* now
              const rows = yield* sql<JobRow>`
                UPDATE jobs SET state = 'queued', next_attempt_at = ${at},
                  attempt_limit = attempts + ${ATTEMPT_LIMIT}, error_code = NULL, error_message = NULL,
                  result = NULL, finished_at = NULL, session_id = NULL, updated_at = ${at}
                WHERE id = ${id} RETURNING *`
              yield* audit.record(owner, {
                action: "job.retried",
                targetType: "job",
                targetId: id,
                details: { kind: row.kind, was: row.state }
              })
              yield* sql`SELECT pg_notify(${WAKE_CHANNEL}, '')`
              return info(rows[0]!)
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))
      })

      const result = Effect.fn("Jobs.result")(function* (owner: Owner, id: string) {
        return yield* resultBlobOf(yield* find(owner, id))
      })

      const resultKey = (id: string) =>
        sql<{ readonly result_key: string | null }>`SELECT result_key FROM jobs WHERE id = ${id}`.pipe(
          Sql.orDefect,
          Effect.map((rows) => rows[0]?.result_key ?? null)
        )

      return Jobs.of({ create, list, get, cancel, retry, result, resultKey, run })
    })
  )
}
