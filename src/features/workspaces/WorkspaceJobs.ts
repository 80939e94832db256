import { Effect, Schema } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import * as Crypto from "node:crypto"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import { jobKind } from "../jobs/JobKind.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import { importJobKind } from "./WorkspaceImportJob.ts"
import { fatal, Selector, workspaceJobHelpers } from "./WorkspaceJobHelpers.ts"
import { snapshotKey, type SnapshotRow, toSnapshotInfo } from "./WorkspaceRows.ts"

const SnapshotName = Schema.String.check(
  Schema.isPattern(/^[a-z0-9]+(?:-[a-z0-9]+)*$/),
  Schema.isMaxLength(63)
)

const SnapshotInput = Schema.Struct({ workspace: Selector, name: Schema.optionalKey(SnapshotName) })
const RestoreInput = Schema.Struct({ workspace: Selector, snapshot: SnapshotName })
const CloneInput = Schema.Struct({ source: Schema.String, target: Schema.String })

/** `snapshot`, `restore`, `import` and the internal `clone`: jobs on a workspace's disk, on the node that holds it. */
export const workspaceJobKinds = Effect.gen(function* () {
  const blobs = yield* BlobStore
  const outbox = yield* WebhookOutbox
  const helpers = yield* workspaceJobHelpers
  const { sql, disks, now, find, onDiskNode, holding, disk } = helpers

  const snapshot = jobKind({
    kind: "snapshot",
    workspace: (input) => input.workspace,
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
        yield* onDiskNode(workspace.id)
        const row = yield* holding(
          workspace.id,
          "snapshotting",
          run.id,
          Effect.gen(function* () {
            yield* disk(disks.materialize(workspace.id))
            const file = yield* disks.tempFile("snapshot.tar.zst")
            yield* disk(disks.disk.archive(workspace.id, file))
            const key = snapshotKey(workspace.id, id)
            // The archive is kept only with its row: interrupted in between (a cancel), it goes.
            return yield* Effect.gen(function* () {
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
                .pipe(Sql.orDefect)
            }).pipe(
              Effect.onExit((exit) =>
                exit._tag === "Success" && exit.value !== undefined ? Effect.void : blobs.remove(key)
              )
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
    workspace: (input) => input.workspace,
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
          Sql.orDefect
        )
        if (found === undefined) return yield* fatal("snapshot_not_found", "Snapshot not found.")
        yield* onDiskNode(workspace.id)
        const restored = yield* holding(
          workspace.id,
          "restoring",
          run.id,
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
                  // Deleted while it was unpacked: the content is the snapshot's all the same.
                  const restoredRow = rows[0] ?? { ...found, restored_at: at }
                  yield* outbox.emit(run.owner.accountId, "snapshot.restored", {
                    id: found.id,
                    workspace_id: workspace.id,
                    name: found.name,
                    used_bytes: Number(found.used_bytes)
                  })
                  return restoredRow
                })
              )
              .pipe(Sql.orDefect)
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
    run: (input, run) =>
      Effect.gen(function* () {
        yield* onDiskNode(input.source)
        yield* sql`UPDATE workspaces SET held_by = ${run.id} WHERE id = ${input.target} AND status = 'cloning'`.pipe(
          Sql.orDefect
        )
        // The source held while it is copied: no session writes to it, no restore switches it.
        const here = yield* disks.disk.exists(input.source)
        if (here && (yield* disks.owns(input.source)))
          yield* holding(input.source, "cloning", run.id, disk(disks.disk.clone(input.source, input.target)))
        else {
          // The source's node is gone (or it never had a disk): its newest snapshot, if it has one.
          const [newest] = yield* sql<SnapshotRow>`
            SELECT * FROM workspace_snapshots WHERE workspace_id = ${input.source}
            ORDER BY created_at DESC LIMIT 1`.pipe(Sql.orDefect)
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
        yield* sql`UPDATE workspaces SET status = 'ready', held_by = NULL
          WHERE id = ${input.target} AND status = 'cloning'`.pipe(Sql.orDefect)
        return { result: { workspace_id: input.target, used_bytes: bytes } }
      })
  })

  const importRepo = yield* importJobKind(helpers)

  return [snapshot, restore, clone, importRepo]
})
