import { Clock, Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Audit } from "../audit/Audit.ts"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import { Placement } from "../../platform/cluster/Placement.ts"
import { ServiceConfig } from "../../platform/config/Config.ts"
import { Forbidden, InvalidField, type InvalidRequest, ServiceUnavailable } from "../../kernel/Errors.ts"
import { isUuid } from "../../kernel/Ids.ts"
import type { Owner } from "../../kernel/Owner.ts"
import {
  ImportFailed,
  isSlug,
  SnapshotNotFound,
  StorageLimitReached,
  WorkspaceConflict,
  type WorkspaceInfo,
  WorkspaceNotFound,
  WorkspaceSnapshotInfo
} from "../../kernel/Workspace.ts"
import { Jobs } from "../jobs/Jobs.ts"
import { SessionKinds } from "../../runtime/SessionKinds.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import {
  checkStorage,
  generatedName,
  selectWorkspaces,
  toWorkspaceInfo,
  type WorkspaceRow
} from "./WorkspaceRows.ts"
import { WorkspaceDisks } from "./WorkspaceDisks.ts"
import { importCase } from "./WorkspaceImport.ts"
import { lifecycleCases } from "./WorkspaceLifecycle.ts"
import { snapshotCases } from "./WorkspaceSnapshots.ts"

export type WorkspaceError = WorkspaceNotFound | WorkspaceConflict
/** What a route answers for a job it waited for that did not succeed. */
export type JobOutcomeError = WorkspaceError | SnapshotNotFound | ServiceUnavailable

/**
 * The workspace use cases: create (a name, or one generated; a clone by a
 * job on the node holding the source), list, rename, the template flag,
 * delete (refused while a session is open), snapshots and restores (jobs on
 * the workspace's node, waited for).
 */
export class Workspaces extends Context.Service<
  Workspaces,
  {
    readonly create: (
      owner: Owner,
      input: unknown
    ) => Effect.Effect<
      WorkspaceInfo,
      | InvalidField
      | InvalidRequest
      | WorkspaceError
      | StorageLimitReached
      | SnapshotNotFound
      | ServiceUnavailable
    >
    /** `POST /v1/workspaces/import`: a sandbox workspace with a repository cloned into its home by an `import` job. */
    readonly importRepo: (
      owner: Owner,
      input: unknown
    ) => Effect.Effect<
      WorkspaceInfo,
      InvalidField | InvalidRequest | Forbidden | JobOutcomeError | StorageLimitReached | ImportFailed
    >
    readonly list: (owner: Owner) => Effect.Effect<ReadonlyArray<WorkspaceInfo>>
    readonly get: (owner: Owner, selector: string) => Effect.Effect<WorkspaceInfo, WorkspaceNotFound>
    readonly rename: (
      owner: Owner,
      selector: string,
      name: string | null
    ) => Effect.Effect<{ readonly id: string; readonly name: string }, InvalidField | WorkspaceError>
    readonly setTemplate: (
      owner: Owner,
      selector: string,
      template: boolean | undefined
    ) => Effect.Effect<WorkspaceInfo, WorkspaceError>
    readonly remove: (owner: Owner, selector: string) => Effect.Effect<void, WorkspaceError>
    readonly bulkDelete: (
      owner: Owner,
      input: unknown
    ) => Effect.Effect<
      {
        readonly deleted: ReadonlyArray<string>
        readonly skipped: ReadonlyArray<{ workspace: string; code: string; message: string }>
      },
      InvalidField | InvalidRequest
    >
    readonly snapshot: (
      owner: Owner,
      selector: string,
      name: string | null | undefined
    ) => Effect.Effect<WorkspaceSnapshotInfo, InvalidField | JobOutcomeError | StorageLimitReached>
    readonly snapshots: (
      owner: Owner,
      selector: string
    ) => Effect.Effect<ReadonlyArray<WorkspaceSnapshotInfo>, WorkspaceNotFound>
    readonly restore: (
      owner: Owner,
      selector: string,
      name: string
    ) => Effect.Effect<WorkspaceSnapshotInfo, JobOutcomeError>
    readonly removeSnapshot: (
      owner: Owner,
      selector: string,
      name: string
    ) => Effect.Effect<void, WorkspaceError | SnapshotNotFound>
  }
>()("rbs/workspaces/Workspaces") {
  static readonly layer = Layer.effect(
    Workspaces,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const config = yield* ServiceConfig
      const audit = yield* Audit
      const outbox = yield* WebhookOutbox
      const jobs = yield* Jobs
      const kinds = yield* SessionKinds
      const placement = yield* Placement
      const blobs = yield* BlobStore
      const disks = yield* WorkspaceDisks
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))
      const select = selectWorkspaces(sql, config.nodeId, config.nodeUrl)

      const bySelector = (selector: string) =>
        isUuid(selector) ? sql`w.id = ${selector}::uuid` : sql`w.name = ${selector}`

      const find = (owner: Owner, selector: string, lock = false) =>
        sql<WorkspaceRow>`${select} WHERE w.account_id = ${owner.accountId} AND ${bySelector(selector)}
          ${lock ? sql`FOR UPDATE OF w` : sql``}`.pipe(
          Effect.orDie,
          Effect.flatMap((rows) =>
            rows[0] === undefined ? Effect.fail(new WorkspaceNotFound()) : Effect.succeed(rows[0])
          )
        )

      const storageRoom = (owner: Owner) =>
        checkStorage(sql, owner.accountId, config.limits.workspaceStorageMb)

      /** Where a job on the workspace's disk runs: its node while it lives, else any (from its snapshots). */
      const diskNode = (row: WorkspaceRow) =>
        row.node_id === null
          ? Effect.succeed(null)
          : Effect.map(placement.isLive(row.node_id), (live) => (live ? row.node_id : null))

      const openSession = (row: WorkspaceRow) =>
        row.active_session_id === null
          ? Effect.void
          : Effect.fail(
              new WorkspaceConflict({
                detail: `The workspace has an open session (${row.active_session_id}): end it first.`
              })
            )

      /**
       * A job the route waited for, as the route's answer: its refusals as the
       * errors they are, one still running (the wait ran out) a 503, anything
       * else a defect.
       */
      const failedJob = (job: {
        readonly id: string
        readonly state: string
        readonly error: { readonly code: string; readonly message: string } | null
      }) => {
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

      const list = (owner: Owner) =>
        sql<WorkspaceRow>`${select} WHERE w.account_id = ${owner.accountId} ORDER BY w.created_at DESC, w.id`.pipe(
          Effect.orDie,
          Effect.map((rows) => rows.map(toWorkspaceInfo))
        )

      const get = (owner: Owner, selector: string) => Effect.map(find(owner, selector), toWorkspaceInfo)

      const rename = Effect.fn("Workspaces.rename")(function* (
        owner: Owner,
        selector: string,
        requested: string | null
      ) {
        // No name (null or empty) is a fresh generated one: a workspace always has a name.
        const name = requested === null || requested === "" ? generatedName() : requested
        if (!isSlug(name)) return yield* new InvalidField({ field: "name" })
        const row = yield* find(owner, selector)
        // Two renames to one name at once: the unique index refuses the second, as the check would.
        const renamed = yield* sql`
          UPDATE workspaces SET name = ${name}, updated_at = ${yield* now}
          WHERE id = ${row.id} AND NOT EXISTS (
            SELECT 1 FROM workspaces o WHERE o.account_id = ${owner.accountId} AND o.name = ${name} AND o.id <> ${row.id})
          RETURNING id`.pipe(
          Effect.catchIf(
            (error) => String((error as { cause?: { code?: string } }).cause?.code) === "23505",
            () => Effect.succeed([])
          ),
          Effect.orDie
        )
        if (renamed.length === 0)
          return yield* new WorkspaceConflict({ detail: `A workspace named ${name} exists already.` })
        yield* audit.record(owner, {
          action: "workspace.renamed",
          targetType: "workspace",
          targetId: row.id,
          details: { from: row.name, to: name }
        })
        return { id: row.id, name }
      })

      const setTemplate = Effect.fn("Workspaces.setTemplate")(function* (
        owner: Owner,
        selector: string,
        template: boolean | undefined
      ) {
        const row = yield* find(owner, selector)
        const next = template ?? !row.template
        if (next) yield* openSession(row)
        yield* sql`UPDATE workspaces SET template = ${next}, updated_at = ${yield* now} WHERE id = ${row.id}`.pipe(
          Effect.orDie
        )
        yield* audit.record(owner, {
          action: "workspace.template_set",
          targetType: "workspace",
          targetId: row.id,
          details: { template: next }
        })
        return toWorkspaceInfo(yield* find(owner, row.id))
      })

      const helpers = { sql, audit, jobs, blobs, find, openSession, storageRoom, diskNode, failedJob }
      const { create, remove, bulkDelete } = lifecycleCases({
        ...helpers,
        outbox,
        kinds,
        disks,
        nodeId: config.nodeId
      })
      const { snapshot, snapshots, restore, removeSnapshot } = snapshotCases(helpers)
      const importRepo = importCase({ ...helpers, create, remove })

      return Workspaces.of({
        importRepo,
        create,
        list,
        get,
        rename,
        setTemplate,
        remove,
        bulkDelete,
        snapshot,
        snapshots,
        restore,
        removeSnapshot
      })
    })
  )
}
