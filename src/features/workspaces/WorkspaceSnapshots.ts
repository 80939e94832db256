import { Context, Effect, Layer, Schema } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import { Audit } from "../audit/Audit.ts"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import type { JobInfo } from "../../kernel/Job.ts"
import type { Owner } from "../../kernel/Owner.ts"
import {
  isSlug,
  SnapshotNotFound,
  type StorageLimitReached,
  WorkspaceConflict,
  type WorkspaceNotFound,
  WorkspaceSnapshotInfo
} from "../../kernel/Workspace.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import { Jobs } from "../jobs/Jobs.ts"
import { type SnapshotRow, toSnapshotInfo } from "./WorkspaceRows.ts"
import { JOB_WAIT_MS, type JobOutcomeError, type WorkspaceError, WorkspaceStore } from "./WorkspaceStore.ts"

/**
 * Snapshots: made and restored by jobs on the workspace's node, waited for;
 * listed and deleted here.
 */
export class WorkspaceSnapshots extends Context.Service<
  WorkspaceSnapshots,
  {
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
>()("rbs/workspaces/WorkspaceSnapshots") {
  static readonly layer = Layer.effect(
    WorkspaceSnapshots,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* Audit
      const jobs = yield* Jobs
      const blobs = yield* BlobStore
      const { find, openSession, storageRoom, diskNode, failedJob } = yield* WorkspaceStore
      const snapshot = Effect.fn("Workspaces.snapshot")(function* (
        owner: Owner,
        selector: string,
        name: string | null | undefined
      ) {
        const row = yield* find(owner, selector)
        if (name !== undefined && name !== null && !isSlug(name))
          return yield* new InvalidField({ field: "name" })
        yield* openSession(row)
        yield* storageRoom(owner)
        if (name !== undefined && name !== null) {
          const taken =
            yield* sql`SELECT 1 FROM workspace_snapshots WHERE workspace_id = ${row.id} AND name = ${name}`.pipe(
              Sql.orDefect
            )
          if (taken.length > 0)
            return yield* new WorkspaceConflict({ detail: `The workspace has a snapshot named ${name}.` })
        }
        const job = yield* jobs.run(
          owner,
          "snapshot",
          { workspace: row.id, ...(name === undefined || name === null ? {} : { name }) },
          { nodeId: yield* diskNode(row), waitMs: JOB_WAIT_MS }
        )
        if (job.state === "failed" && job.error?.code === "snapshot_exists")
          return yield* new WorkspaceConflict({ detail: job.error.message })
        yield* failedJob(job)
        const made = yield* snapshotOf(job)
        yield* audit.record(owner, {
          action: "snapshot.created",
          targetType: "workspace",
          targetId: row.id,
          details: { snapshot: made.name, used_bytes: made.used_bytes, job_id: job.id }
        })
        return made
      })

      const snapshotOf = (job: JobInfo) =>
        Schema.decodeUnknownEffect(WorkspaceSnapshotInfo)(job.result).pipe(Sql.orDefect)

      const findSnapshot = (workspaceId: string, name: string) =>
        sql<SnapshotRow>`SELECT * FROM workspace_snapshots WHERE workspace_id = ${workspaceId} AND name = ${name}`.pipe(
          Sql.orDefect,
          Effect.flatMap((rows) =>
            rows[0] === undefined ? Effect.fail(new SnapshotNotFound()) : Effect.succeed(rows[0])
          )
        )

      const snapshots = (owner: Owner, selector: string) =>
        Effect.gen(function* () {
          const row = yield* find(owner, selector)
          const rows = yield* sql<SnapshotRow>`
        SELECT * FROM workspace_snapshots WHERE workspace_id = ${row.id} ORDER BY created_at DESC`.pipe(
            Sql.orDefect
          )
          return rows.map(toSnapshotInfo)
        })

      const restore = Effect.fn("Workspaces.restore")(function* (
        owner: Owner,
        selector: string,
        name: string
      ) {
        const row = yield* find(owner, selector)
        yield* findSnapshot(row.id, name)
        yield* openSession(row)
        const job = yield* jobs.run(
          owner,
          "restore",
          { workspace: row.id, snapshot: name },
          {
            nodeId: yield* diskNode(row),
            waitMs: JOB_WAIT_MS
          }
        )
        yield* failedJob(job)
        yield* audit.record(owner, {
          action: "snapshot.restored",
          targetType: "workspace",
          targetId: row.id,
          details: { snapshot: name, job_id: job.id }
        })
        return yield* snapshotOf(job)
      })

      const removeSnapshot = Effect.fn("Workspaces.removeSnapshot")(function* (
        owner: Owner,
        selector: string,
        name: string
      ) {
        const row = yield* find(owner, selector)
        const found = yield* findSnapshot(row.id, name)
        if (row.status === "restoring")
          return yield* new WorkspaceConflict({
            detail: "The workspace is restoring: wait for it to finish."
          })
        yield* sql`DELETE FROM workspace_snapshots WHERE id = ${found.id}`.pipe(Sql.orDefect)
        yield* blobs.remove(found.blob_key)
        yield* audit.record(owner, {
          action: "snapshot.deleted",
          targetType: "workspace",
          targetId: row.id,
          details: { snapshot: name }
        })
      })

      return WorkspaceSnapshots.of({ snapshot, snapshots, restore, removeSnapshot })
    })
  )
}
