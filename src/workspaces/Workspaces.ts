import { Clock, Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import { BlobStore } from "../blobs/BlobStore.ts"
import { Placement } from "../cluster/Placement.ts"
import { ServiceConfig } from "../Config.ts"
import { Forbidden, InvalidField, type InvalidRequest, ServiceUnavailable } from "../domain/Errors.ts"
import { isUuid } from "../domain/Ids.ts"
import type { Owner } from "../domain/Owner.ts"
import { decodeInput } from "../domain/Validation.ts"
import {
  BulkDeleteWorkspacesRequest,
  CreateWorkspaceRequest,
  ImportFailed,
  isSlug,
  SnapshotNotFound,
  StorageLimitReached,
  WorkspaceConflict,
  type WorkspaceInfo,
  WorkspaceNotFound,
  WorkspaceSnapshotInfo
} from "../domain/Workspace.ts"
import { Jobs } from "../jobs/Jobs.ts"
import { Images } from "../sandbox/Images.ts"
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
import { JOB_WAIT_MS, snapshotCases } from "./WorkspaceSnapshots.ts"

const decodeCreate = decodeInput(CreateWorkspaceRequest)
const decodeBulk = decodeInput(BulkDeleteWorkspacesRequest)

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
      const images = yield* Images
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

      const eventData = (row: WorkspaceRow) => ({
        id: row.id,
        name: row.name,
        session_type: row.session_type,
        template: row.template,
        source_workspace_id: row.source_workspace_id
      })

      const create = Effect.fn("Workspaces.create")(function* (owner: Owner, raw: unknown) {
        const input = yield* decodeCreate(raw ?? {})
        const name = input.name ?? generatedName()
        if (!isSlug(name)) return yield* new InvalidField({ field: "name" })
        const source =
          input.clone_from === undefined || input.clone_from === null
            ? undefined
            : yield* find(owner, input.clone_from)
        let sessionType = input.session_type ?? source?.session_type ?? null
        const image = input.image ?? (input.clone_from === undefined ? null : (source?.image ?? null))
        if (image !== null) {
          if (sessionType === "browser") return yield* new InvalidField({ field: "image" })
          if (!(yield* images.exists(image))) return yield* new InvalidField({ field: "image" })
          sessionType = "sandbox"
        }
        if (source !== undefined) yield* storageRoom(owner)
        const id = Crypto.randomUUID()
        const at = yield* now
        const inserted = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const rows = yield* sql<{ readonly id: string }>`
                INSERT INTO workspaces (id, account_id, name, session_type, image, template, persistence,
                  source_workspace_id, status, created_at, updated_at)
                VALUES (${id}, ${owner.accountId}, ${name}, ${sessionType}, ${image}, ${input.template ?? false},
                  ${input.persistence ?? true}, ${source?.id ?? null}, ${source === undefined ? "ready" : "cloning"},
                  ${at}, ${at})
                ON CONFLICT (account_id, name) DO NOTHING RETURNING id`
              if (rows.length === 0) return false
              const row = yield* find(owner, id)
              yield* audit.record(owner, {
                action: "workspace.created",
                targetType: "workspace",
                targetId: id,
                details: { name, ...(source === undefined ? {} : { clone_from: source.id }) }
              })
              yield* outbox.emit(owner.accountId, "workspace.created", eventData(row))
              return true
            })
          )
          .pipe(Effect.orDie)
        if (!inserted)
          return yield* new WorkspaceConflict({ detail: `A workspace named ${name} exists already.` })
        if (source !== undefined) {
          const job = yield* jobs
            .run(
              owner,
              "clone",
              { source: source.id, target: id },
              { nodeId: yield* diskNode(source), waitMs: JOB_WAIT_MS }
            )
            .pipe(
              // The client went away: the clone is not kept (its disk goes with its node's next start).
              Effect.onInterrupt(() => sql`DELETE FROM workspaces WHERE id = ${id}`.pipe(Effect.ignore))
            )
          if (job.state !== "succeeded") {
            // No half-made clone stays: its row goes, and its disk with the next start of its node.
            yield* sql`DELETE FROM workspaces WHERE id = ${id}`.pipe(Effect.orDie)
            yield* failedJob(job)
          }
        }
        return toWorkspaceInfo(yield* find(owner, id))
      })

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

      const remove = Effect.fn("Workspaces.remove")(function* (owner: Owner, selector: string) {
        // A session just ended may still have its runtime on the disk (a browser writing its profile
        // out): waited for, 10 s at most.
        const target = yield* find(owner, selector)
        for (let i = 0; i < 100; i++) {
          const [held] = yield* sql<{ readonly mounted_by: string | null }>`
            SELECT mounted_by FROM workspaces WHERE id = ${target.id}`.pipe(Effect.orDie)
          if (held?.mounted_by == null || target.active_session_id !== null) break
          yield* Effect.sleep("100 millis")
        }
        const removed = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const row = yield* find(owner, selector, true)
              yield* openSession(row)
              if (row.status !== "ready")
                return yield* new WorkspaceConflict({
                  detail: `The workspace is ${row.status}: wait for it to finish.`
                })
              const snapshots = yield* sql<{ readonly blob_key: string }>`
                SELECT blob_key FROM workspace_snapshots WHERE workspace_id = ${row.id}`
              yield* sql`DELETE FROM workspaces WHERE id = ${row.id}`
              yield* audit.record(owner, {
                action: "workspace.deleted",
                targetType: "workspace",
                targetId: row.id,
                details: { name: row.name }
              })
              yield* outbox.emit(owner.accountId, "workspace.deleted", eventData(row))
              return { row, snapshots }
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))
        // Its disk: here at once; on another node at that node's next start (it removes disks with no row).
        yield* Effect.forEach(removed.snapshots, (snapshot) => blobs.remove(snapshot.blob_key), {
          discard: true
        })
        if (removed.row.node_id === config.nodeId) yield* disks.disk.remove(removed.row.id)
      })

      const bulkDelete = Effect.fn("Workspaces.bulkDelete")(function* (owner: Owner, raw: unknown) {
        const input = yield* decodeBulk(raw)
        const deleted: Array<string> = []
        const skipped: Array<{ workspace: string; code: string; message: string }> = []
        for (const selector of input.workspaces) {
          const done = yield* Effect.result(remove(owner, selector))
          if (done._tag === "Success") deleted.push(selector)
          else skipped.push({ workspace: selector, code: done.failure.code, message: done.failure.message })
        }
        return { deleted, skipped }
      })

      const helpers = { sql, audit, jobs, blobs, find, openSession, storageRoom, diskNode, failedJob }
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
