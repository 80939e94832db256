import { Context, Effect, Layer, Option } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import { Placement } from "../../platform/cluster/Placement.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import { type ResourceLimitReached, ServiceUnavailable } from "../../kernel/Errors.ts"
import { isUuid } from "../../kernel/Ids.ts"
import type { JobInfo } from "../../kernel/Job.ts"
import type { Owner } from "../../kernel/Owner.ts"
import {
  SnapshotNotFound,
  type StorageLimitReached,
  WorkspaceConflict,
  WorkspaceNotFound
} from "../../kernel/Workspace.ts"
import { checkStorage, selectWorkspaces, type WorkspaceRecord, type WorkspaceRow } from "./WorkspaceRows.ts"
import { SessionsRepo } from "../sessions/SessionsRepo.ts"
import { Nodes } from "../../platform/cluster/Nodes.ts"
import { WorkspaceNodes } from "../jobs/JobSession.ts"
import { LimitsConfig } from "../limits/LimitsConfig.ts"
import { AccountBounds } from "../limits/AccountBounds.ts"
import { SessionLogsRepo } from "../logs/SessionLogsRepo.ts"

export type WorkspaceError = WorkspaceNotFound | WorkspaceConflict
/** What a route answers for a job it waited for that did not succeed. */
export type JobOutcomeError = WorkspaceError | SnapshotNotFound | ServiceUnavailable

/** How long a route waits for the job doing its work before it answers 503. */
export const JOB_WAIT_MS = 10 * 60_000

/**
 * An account's workspaces as the workspace use cases (`Workspaces`,
 * `WorkspaceSnapshots`, `WorkspaceImport`) find them, and the rules they
 * share: one open session at a time, the account's storage, where a job on
 * a workspace's disk runs, and a waited-for job's outcome as their answer.
 */
export class WorkspaceStore extends Context.Service<
  WorkspaceStore,
  {
    /** By id or name; `lock` holds the row for the caller's transaction. */
    readonly find: (
      owner: Owner,
      selector: string,
      lock?: boolean
    ) => Effect.Effect<WorkspaceRow, WorkspaceNotFound>
    /** `find` in an account given by id (a session's create names its account, not an owner). */
    readonly findOf: (accountId: string, selector: string) => Effect.Effect<WorkspaceRow, WorkspaceNotFound>
    /** Newest first. */
    readonly list: (owner: Owner) => Effect.Effect<ReadonlyArray<WorkspaceRow>>
    readonly openSession: (row: WorkspaceRow) => Effect.Effect<void, WorkspaceConflict>
    readonly storageRoom: (owner: Owner) => Effect.Effect<void, StorageLimitReached>
    /**
     * Refuses a new workspace of the account at `LIMIT_WORKSPACES_PER_ACCOUNT` (409 `resource_limit`):
     * in the transaction that inserts it, before the insert.
     */
    readonly reserveSlot: (accountId: string) => Effect.Effect<void, ResourceLimitReached>
    /** The node each of `ids` records its disk on (`null`: none yet); the workspaces that exist. */
    readonly nodesOf: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, string | null>>
    /** Where a job on the workspace's disk runs: its node while it lives, else any (from its snapshots). */
    readonly diskNode: (row: WorkspaceRow) => Effect.Effect<string | null>
    /**
     * A job the route waited for, as the route's answer: its refusals as the
     * errors they are, one still running (the wait ran out) a 503, anything
     * else a defect.
     */
    readonly failedJob: (job: JobInfo) => Effect.Effect<void, JobOutcomeError>
    /**
     * An assistant's home: a sandbox workspace of the account, `ready`, kept
     * (`persistence`), marked `assistant_home`, in the caller's transaction.
     */
    readonly createHome: (home: {
      readonly id: string
      readonly accountId: string
      readonly name: string
      readonly image: string | null
      readonly at: Date
    }) => Effect.Effect<void, ResourceLimitReached>
  }
>()("rbs/workspaces/WorkspaceStore") {
  static readonly layer = Layer.effect(
    WorkspaceStore,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const config = yield* NodeConfig
      const limits = yield* LimitsConfig
      const placement = yield* Placement
      const sessions = yield* SessionsRepo
      const nodes = yield* Nodes
      const bounds = yield* AccountBounds
      const logs = yield* SessionLogsRepo
      const select = selectWorkspaces(sql)

      const reserveSlot = (accountId: string) =>
        bounds.reserve(
          "workspaces",
          accountId,
          sql<{ readonly n: number }>`
            SELECT count(*)::int AS n FROM workspaces WHERE account_id = ${accountId}`.pipe(
            Effect.map((rows) => rows[0]?.n ?? 0),
            Sql.orDefect
          )
        )

      /** The rows as their use cases read them: with their node's URL and their sessions. */
      const enrich = (records: ReadonlyArray<WorkspaceRecord>) =>
        Effect.gen(function* () {
          if (records.length === 0) return [] as ReadonlyArray<WorkspaceRow>
          const sessionsOf = yield* sessions.onWorkspaces(records.map((record) => record.id))
          const urls = yield* nodes.urlsOf([
            ...new Set(records.flatMap((record) => (record.node_id === null ? [] : [record.node_id])))
          ])
          return records.map((record): WorkspaceRow => ({
            ...record,
            // This node's own when it has not beaten yet (a single node never does).
            node_url:
              record.node_id === null
                ? null
                : (urls.get(record.node_id) ?? (record.node_id === config.nodeId ? config.nodeUrl : null)),
            active_session_id: sessionsOf.get(record.id)?.active ?? null,
            last_session_id: sessionsOf.get(record.id)?.last ?? null
          }))
        })

      const bySelector = (selector: string) =>
        isUuid(selector) ? sql`w.id = ${selector}::uuid` : sql`w.name = ${selector}`

      const findOf = (accountId: string, selector: string, lock = false) =>
        sql<WorkspaceRecord>`${select} WHERE w.account_id = ${accountId} AND ${bySelector(selector)}
          ${lock ? sql`FOR UPDATE OF w` : sql``}`.pipe(
          Sql.orDefect,
          Effect.flatMap(enrich),
          Effect.flatMap((rows) =>
            rows[0] === undefined ? Effect.fail(new WorkspaceNotFound()) : Effect.succeed(rows[0])
          )
        )

      return WorkspaceStore.of({
        find: (owner, selector, lock = false) => findOf(owner.accountId, selector, lock),
        findOf: (accountId, selector) => findOf(accountId, selector),
        list: (owner) =>
          sql<WorkspaceRecord>`${select} WHERE w.account_id = ${owner.accountId} ORDER BY w.created_at DESC, w.id`.pipe(
            Sql.orDefect,
            Effect.flatMap(enrich)
          ),
        openSession: (row) =>
          row.active_session_id === null
            ? Effect.void
            : Effect.fail(
                new WorkspaceConflict({
                  detail: `The workspace has an open session (${row.active_session_id}): end it first.`
                })
              ),
        storageRoom: (owner) => checkStorage(sql, owner.accountId, limits.workspaceStorageMb, logs.usedBytes),
        reserveSlot,
        nodesOf: (ids) =>
          ids.length === 0
            ? Effect.succeed(new Map<string, string | null>())
            : sql<{ readonly id: string; readonly node_id: string | null }>`
                SELECT id, node_id FROM workspaces WHERE id = ANY (${ids}::uuid[])`.pipe(
                Sql.orDefect,
                Effect.map((rows) => new Map(rows.map((row) => [row.id, row.node_id])))
              ),
        diskNode: (row) =>
          row.node_id === null
            ? Effect.succeed(null)
            : Effect.map(placement.isLive(row.node_id), (live) => (live ? row.node_id : null)),
        createHome: (home) =>
          Effect.andThen(
            reserveSlot(home.accountId),
            sql`
              INSERT INTO workspaces (id, account_id, name, session_type, image, template, persistence,
                status, assistant_home, created_at, updated_at)
              VALUES (${home.id}, ${home.accountId}, ${home.name}, 'sandbox', ${home.image},
                false, true, 'ready', true, ${home.at}, ${home.at})`.pipe(Effect.asVoid, Sql.orDefect)
          ),
        failedJob: (job) => {
          if (job.state === "succeeded") return Effect.void
          switch (job.error?.code) {
            case "workspace_not_found":
              return Effect.fail(new WorkspaceNotFound())
            case "snapshot_not_found":
              return Effect.fail(new SnapshotNotFound())
            case "snapshot_exists":
              return Effect.fail(new WorkspaceConflict({ detail: job.error.message }))
          }
          if (job.state === "queued" || job.state === "running") return Effect.fail(new ServiceUnavailable())
          return Effect.die(new Error(`the workspace's job ${job.state}: ${job.error?.message ?? ""}`))
        }
      })
    })
  )

  /** Jobs on a workspace run where its disk is: the owner's workspace by id or name, its live node. */
  static readonly workspaceNodes = Layer.effect(
    WorkspaceNodes,
    WorkspaceStore.useSync((store) =>
      WorkspaceNodes.of({
        diskNode: (owner, selector) =>
          store.find(owner, selector).pipe(
            Effect.flatMap(store.diskNode),
            Effect.catchTag("WorkspaceNotFound", () => Effect.succeed(null))
          ),
        locate: (owner, selector) =>
          store.find(owner, selector).pipe(
            Effect.flatMap(store.diskNode),
            Effect.map(Option.some),
            Effect.catchTag("WorkspaceNotFound", () => Effect.succeed(Option.none()))
          )
      })
    )
  )
}
