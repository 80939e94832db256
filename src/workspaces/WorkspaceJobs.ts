import { Clock, Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { BlobStore } from "../blobs/BlobStore.ts"
import { isUuid } from "../domain/Ids.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import { JobFailed, jobKind, type JobRun } from "../jobs/JobKind.ts"
import { WorkspaceDisks } from "./WorkspaceDisks.ts"
import { snapshotKey, type SnapshotRow, toSnapshotInfo } from "./WorkspaceRows.ts"

const Selector = Schema.String.annotate({ description: "A workspace's name (preferred) or id." })
const SnapshotName = Schema.String.check(
  Schema.isPattern(/^[a-z0-9]+(?:-[a-z0-9]+)*$/),
  Schema.isMaxLength(63)
)

const SnapshotInput = Schema.Struct({ workspace: Selector, name: Schema.optionalKey(SnapshotName) })
const RestoreInput = Schema.Struct({ workspace: Selector, snapshot: SnapshotName })
const CloneInput = Schema.Struct({ source: Schema.String, target: Schema.String })

const fatal = (code: string, detail: string) => new JobFailed({ code, detail, retryable: false })

/** `snapshot`, `restore` and the internal `clone`: jobs on a workspace's disk, on the node that holds it. */
export const workspaceJobKinds = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const disks = yield* WorkspaceDisks
  const blobs = yield* BlobStore
  const outbox = yield* WebhookOutbox
  const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

  /** The owner's workspace by name or id, or the job fails: it was deleted meanwhile. */
  const find = (run: JobRun, selector: string) =>
    Effect.gen(function* () {
      const rows = yield* sql<{ readonly id: string; readonly template: boolean }>`
        SELECT id, template FROM workspaces WHERE account_id = ${run.owner.accountId}
          AND ${isUuid(selector) ? sql`id = ${selector}::uuid` : sql`name = ${selector}`}`.pipe(Effect.orDie)
      const row = rows[0]
      if (row === undefined) return yield* fatal("workspace_not_found", "Workspace not found.")
      return row
    })

  /**
   * Holds the workspace in `status` while `work` runs: taken only from
   * `ready` with no open session (a session's create locks the same row), so
   * nothing writes to the disk meanwhile; an open session makes the job wait
   * for its end (tried again every 5 s, uncounted).
   */
  const holding = <A>(id: string, status: string, work: Effect.Effect<A, JobFailed>) =>
    Effect.gen(function* () {
      const taken = yield* sql
        .withTransaction(
          Effect.gen(function* () {
            const [row] = yield* sql<{
              readonly status: string
              readonly open: boolean
              readonly mounted_by: string | null
            }>`
            SELECT status, mounted_by, EXISTS (SELECT 1 FROM sessions s WHERE s.workspace_id = w.id
              AND s.status IN ('creating', 'ready')) AS open
            FROM workspaces w WHERE id = ${id} FOR UPDATE`
            if (row === undefined || row.status !== "ready" || row.open || row.mounted_by !== null)
              return false
            yield* sql`UPDATE workspaces SET status = ${status}, updated_at = ${yield* now} WHERE id = ${id}`
            return true
          })
        )
        .pipe(Effect.orDie)
      if (!taken)
        return yield* new JobFailed({
          code: "workspace_busy",
          detail: "The workspace has an open session or another job: this one waits for it.",
          retryable: true,
          deferred: true,
          // A session's runtime gives the disk back within seconds of its end.
          deferMs: 500
        })
      return yield* work.pipe(
        Effect.ensuring(
          sql`UPDATE workspaces SET status = 'ready' WHERE id = ${id} AND status = ${status}`.pipe(
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

  const snapshot = jobKind({
    kind: "snapshot",
    description:
      "Archives a workspace (tar + zstd) into the blob store as a snapshot named `name` (generated when omitted), on the node that holds its disk. Waits while a session is open on it. Result: the WorkspaceSnapshotInfo.",
    input: SnapshotInput,
    requires: ["workspaces.write"],
    runtime: null,
    timeoutSeconds: () => 3600,
    run: (input, run) =>
      Effect.gen(function* () {
        const workspace = yield* find(run, input.workspace)
        const name = input.name ?? `snap-${Crypto.randomBytes(4).toString("hex")}`
        const id = Crypto.randomUUID()
        const row = yield* holding(
          workspace.id,
          "snapshotting",
          Effect.gen(function* () {
            yield* disk(disks.materialize(workspace.id))
            const file = yield* disks.tempFile("snapshot.tar.zst")
            yield* disk(disks.disk.archive(workspace.id, file))
            const key = snapshotKey(workspace.id, id)
            const { bytes } = yield* blobs.putFile(key, file)
            const at = yield* now
            return yield* sql
              .withTransaction(
                Effect.gen(function* () {
                  const rows = yield* sql<SnapshotRow>`
                  INSERT INTO workspace_snapshots (id, workspace_id, account_id, name, blob_key, used_bytes, created_at)
                  VALUES (${id}, ${workspace.id}, ${run.owner.accountId}, ${name}, ${key}, ${bytes}, ${at})
                  ON CONFLICT (workspace_id, name) DO NOTHING RETURNING *`
                  const inserted = rows[0]
                  if (inserted === undefined) return undefined
                  yield* outbox.emit(run.owner.accountId, "snapshot.created", {
                    id,
                    workspace_id: workspace.id,
                    name,
                    used_bytes: bytes
                  })
                  return inserted
                })
              )
              .pipe(
                Effect.orDie,
                Effect.tap((inserted) => (inserted === undefined ? blobs.remove(key) : Effect.void))
              )
          }).pipe(Effect.scoped)
        )
        if (row === undefined)
          return yield* fatal("snapshot_exists", `The workspace has a snapshot named ${name}.`)
        return { result: toSnapshotInfo(row) }
      })
  })

  const restore = jobKind({
    kind: "restore",
    description:
      "Replaces a workspace's content with its snapshot `snapshot`, atomically (stopped halfway, the workspace keeps its old content), on the node that holds its disk, or on any node when that one is gone (the workspace's disk then lives there). Waits while a session is open on it. Result: the WorkspaceSnapshotInfo with `restored_at`.",
    input: RestoreInput,
    requires: ["workspaces.write"],
    runtime: null,
    timeoutSeconds: () => 3600,
    run: (input, run) =>
      Effect.gen(function* () {
        const workspace = yield* find(run, input.workspace)
        const [found] = yield* sql<SnapshotRow>`
          SELECT * FROM workspace_snapshots WHERE workspace_id = ${workspace.id} AND name = ${input.snapshot}`.pipe(
          Effect.orDie
        )
        if (found === undefined) return yield* fatal("snapshot_not_found", "Snapshot not found.")
        const restored = yield* holding(
          workspace.id,
          "restoring",
          Effect.gen(function* () {
            const file = yield* disks.tempFile("restore.tar.zst")
            yield* blobs.getFile(found.blob_key, file)
            yield* disk(disks.disk.restore(workspace.id, file))
            yield* disk(disks.materialize(workspace.id))
            yield* disk(disks.measure(workspace.id))
            const at = yield* now
            return yield* sql
              .withTransaction(
                Effect.gen(function* () {
                  const rows = yield* sql<SnapshotRow>`
                    UPDATE workspace_snapshots SET restored_at = ${at} WHERE id = ${found.id} RETURNING *`
                  yield* outbox.emit(run.owner.accountId, "snapshot.restored", {
                    id: found.id,
                    workspace_id: workspace.id,
                    name: found.name,
                    used_bytes: Number(found.used_bytes)
                  })
                  return rows[0]!
                })
              )
              .pipe(Effect.orDie)
          }).pipe(Effect.scoped)
        )
        return { result: toSnapshotInfo(restored) }
      })
  })

  const clone = jobKind({
    kind: "clone",
    description: "Copies a workspace's content into a new one (for `POST /v1/workspaces` with `clone_from`).",
    input: CloneInput,
    requires: ["workspaces.write"],
    runtime: null,
    timeoutSeconds: () => 3600,
    internal: true,
    run: (input) =>
      Effect.gen(function* () {
        if (yield* disks.disk.exists(input.source)) yield* disk(disks.disk.clone(input.source, input.target))
        else {
          // The source's node is gone (or it never had a disk): its newest snapshot, if it has one.
          const [newest] = yield* sql<SnapshotRow>`
            SELECT * FROM workspace_snapshots WHERE workspace_id = ${input.source}
            ORDER BY created_at DESC LIMIT 1`.pipe(Effect.orDie)
          if (newest !== undefined)
            yield* Effect.scoped(
              Effect.gen(function* () {
                const file = yield* disks.tempFile("clone.tar.zst")
                yield* blobs.getFile(newest.blob_key, file)
                yield* disk(disks.disk.restore(input.target, file))
              })
            )
        }
        yield* disk(disks.materialize(input.target))
        const bytes = yield* disk(disks.measure(input.target))
        yield* sql`UPDATE workspaces SET status = 'ready' WHERE id = ${input.target} AND status = 'cloning'`.pipe(
          Effect.orDie
        )
        return { result: { workspace_id: input.target, used_bytes: bytes } }
      })
  })

  return [snapshot, restore, clone]
})
