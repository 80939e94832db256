import { Clock, Effect, Schema } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import { Placement } from "../../platform/cluster/Placement.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import { isUuid } from "../../kernel/Ids.ts"
import { ActiveJobs } from "../jobs/ActiveJobs.ts"
import { JobFailed, type JobRun } from "../jobs/JobKind.ts"
import { SessionsRepo } from "../sessions/SessionsRepo.ts"
import { WorkspaceDisks } from "./WorkspaceDisks.ts"

export const Selector = Schema.String.annotate({ description: "A workspace's name (preferred) or id." })

export const fatal = (code: string, detail: string) => new JobFailed({ code, detail, retryable: false })

/**
 * What the workspace jobs share: the workspace a job names, the node it must
 * run on, and the hold on the workspace's disk while it works.
 */
export interface WorkspaceJobHelpers {
  readonly sql: SqlClient.SqlClient
  readonly disks: WorkspaceDisks["Service"]
  readonly now: Effect.Effect<Date>
  readonly find: (
    run: JobRun,
    selector: string
  ) => Effect.Effect<{ readonly id: string; readonly template: boolean }, JobFailed>
  readonly onDiskNode: (workspaceId: string) => Effect.Effect<void, JobFailed>
  readonly holding: <A>(
    id: string,
    status: string,
    jobId: string,
    work: Effect.Effect<A, JobFailed>
  ) => Effect.Effect<A, JobFailed>
  readonly disk: <A>(effect: Effect.Effect<A, { readonly message: string }>) => Effect.Effect<A, JobFailed>
}

export const workspaceJobHelpers = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const config = yield* NodeConfig
  const placement = yield* Placement
  const disks = yield* WorkspaceDisks
  const activeJobs = yield* ActiveJobs
  const sessions = yield* SessionsRepo
  const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

  /** The owner's workspace by name or id, or the job fails: it was deleted meanwhile. */
  const find = (run: JobRun, selector: string) =>
    Effect.gen(function* () {
      const rows = yield* sql<{ readonly id: string; readonly template: boolean }>`
        SELECT id, template FROM workspaces WHERE account_id = ${run.owner.accountId}
          AND ${isUuid(selector) ? sql`id = ${selector}::uuid` : sql`name = ${selector}`}`.pipe(Sql.orDefect)
      const row = rows[0]
      if (row === undefined) return yield* fatal("workspace_not_found", "Workspace not found.")
      return row
    })

  /**
   * Where the job must run: the node holding the workspace's disk while it
   * lives. Claimed elsewhere (queued before the disk had a node, or taken
   * from a node that looked gone), it is handed to that node.
   */
  const onDiskNode = (workspaceId: string) =>
    Effect.gen(function* () {
      const [row] = yield* sql<{ readonly node_id: string | null }>`
        SELECT node_id FROM workspaces WHERE id = ${workspaceId}`.pipe(Sql.orDefect)
      if (row?.node_id == null || row.node_id === config.nodeId) return
      if (!(yield* placement.isLive(row.node_id))) return
      return yield* new JobFailed({
        code: "moved",
        detail: "The workspace's disk is on another node: the job runs there.",
        retryable: true,
        deferred: true,
        deferMs: 100,
        pinTo: row.node_id
      })
    })

  /**
   * Holds the workspace in `status` for job `jobId` while `work` runs: taken
   * from `ready` (or from a hold of this job's earlier attempt, or of a job
   * that no longer runs: a node that died mid-job) with no open session and
   * no session's runtime still on its disk (unless that runtime's node is
   * gone). A session's create locks the same row, so nothing writes to the
   * disk meanwhile. Busy, the job waits (tried again soon, uncounted).
   */
  const holding = <A>(id: string, status: string, jobId: string, work: Effect.Effect<A, JobFailed>) =>
    Effect.gen(function* () {
      const taken = yield* sql
        .withTransaction(
          Effect.gen(function* () {
            // Locked first: a session's create takes the same lock, so the checks below hold.
            const [row] = yield* sql<{
              readonly status: string
              readonly held_by: string | null
              readonly mounted_by: string | null
            }>`SELECT status, held_by, mounted_by FROM workspaces WHERE id = ${id} FOR UPDATE`
            if (row === undefined) return false
            const unheld =
              row.status === "ready" ||
              row.held_by === jobId ||
              row.held_by === null ||
              !(yield* activeJobs.isActive(row.held_by))
            if (!unheld) return false
            if ((yield* sessions.openOnWorkspace(id)) !== null) return false
            if (row.mounted_by !== null && !(yield* disks.holderGone(row.mounted_by))) return false
            yield* sql`UPDATE workspaces SET status = ${status}, held_by = ${jobId}, mounted_by = NULL,
              updated_at = ${yield* now} WHERE id = ${id}`
            return true
          })
        )
        .pipe(Sql.orDefect)
      if (!taken)
        return yield* new JobFailed({
          code: "workspace_busy",
          detail: "The workspace has an open session or another job: this one waits for it.",
          retryable: true,
          deferred: true,
          // A session's runtime gives the disk back within seconds of its end; a job may take longer.
          deferMs: 500
        })
      return yield* work.pipe(
        Effect.ensuring(
          sql`UPDATE workspaces SET status = 'ready', held_by = NULL WHERE id = ${id} AND held_by = ${jobId}`.pipe(
            Effect.ignore
          )
        )
      )
    })

  const disk = <A>(effect: Effect.Effect<A, { readonly message: string }>) =>
    effect.pipe(
      Effect.mapError(
        (error) => new JobFailed({ code: "disk_failed", detail: error.message, retryable: true })
      )
    )

  const helpers: WorkspaceJobHelpers = { sql, disks, now, find, onDiskNode, holding, disk }
  return helpers
})
