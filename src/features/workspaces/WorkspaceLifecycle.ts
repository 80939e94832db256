import { Clock, Effect, Schedule } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import * as Crypto from "node:crypto"
import { InvalidField } from "../../kernel/Errors.ts"
import type { Owner } from "../../kernel/Owner.ts"
import {
  type BulkDeleteWorkspacesRequest,
  type CreateWorkspaceRequest,
  isSlug,
  WorkspaceConflict
} from "../../kernel/Workspace.ts"
import type { SessionKinds } from "../../runtime/SessionKinds.ts"
import type { WebhookOutbox } from "../webhooks/Outbox.ts"
import type { WorkspaceDisks } from "./WorkspaceDisks.ts"
import { generatedName, toWorkspaceInfo, type WorkspaceRow } from "./WorkspaceRows.ts"
import { JOB_WAIT_MS, WorkspaceStore } from "./WorkspaceStore.ts"
import type { SqlClient } from "effect/sql"
import type { Audit } from "../audit/Audit.ts"
import type { Jobs } from "../jobs/Jobs.ts"
import type { BlobStore } from "../../platform/blobs/BlobStore.ts"

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

/** What the `workspace.created` and `workspace.deleted` webhooks carry. */
const eventData = (row: WorkspaceRow) => ({
  id: row.id,
  name: row.name,
  session_type: row.session_type,
  template: row.template,
  source_workspace_id: row.source_workspace_id
})

/**
 * A workspace made (a fresh one, or a clone by a job on the node holding the
 * source, waited for) and deleted (one or many, refused while a session is
 * open), each with its audit record and its webhook.
 */
export const lifecycleCases = (
  helpers: WorkspaceStore["Service"] & {
    readonly sql: SqlClient.SqlClient
    readonly audit: Audit["Service"]
    readonly jobs: Jobs["Service"]
    readonly blobs: BlobStore["Service"]
    readonly outbox: WebhookOutbox["Service"]
    readonly kinds: SessionKinds["Service"]
    readonly disks: WorkspaceDisks["Service"]
    /** This node: a deleted workspace's disk here is removed at once. */
    readonly nodeId: string
  }
) => {
  const { sql, audit, outbox, jobs, kinds, blobs, disks, nodeId } = helpers
  const { find, openSession, storageRoom, reserveSlot, diskNode, failedJob } = helpers

  const create = Effect.fn("Workspaces.create")(function* (owner: Owner, input: CreateWorkspaceRequest) {
    if (input.session_type != null && !kinds.hasType(input.session_type))
      return yield* new InvalidField({ field: "session_type" })
    const name = input.name ?? generatedName()
    if (!isSlug(name)) return yield* new InvalidField({ field: "name" })
    const source =
      input.clone_from === undefined || input.clone_from === null
        ? undefined
        : yield* find(owner, input.clone_from)
    let sessionType = input.session_type ?? source?.session_type ?? null
    const image = input.image ?? (input.clone_from === undefined ? null : (source?.image ?? null))
    if (image !== null) {
      // An image makes it the home of a kind that runs images (a sandbox's), named or not.
      const kind =
        sessionType === null
          ? kinds.all.find((each) => each.accepts.image)
          : kinds.ofRow({ session_type: sessionType, isolation: "browser" })
      if (kind === undefined || !kind.accepts.image) return yield* new InvalidField({ field: "image" })
      if (!(yield* kind.imageExists(image))) return yield* new InvalidField({ field: "image" })
      sessionType = kind.sessionType
    }
    if (source !== undefined) yield* storageRoom(owner)
    const id = Crypto.randomUUID()
    const at = yield* now
    const inserted = yield* (
      sql
        .withTransaction(
          Effect.gen(function* () {
            yield* reserveSlot(owner.accountId)
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
        // The row it has just inserted is there: not finding it is a defect, as the database's failures are.
        .pipe(Effect.catchTag("WorkspaceNotFound", Effect.die), Sql.orDefect)
    )
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
        yield* sql`DELETE FROM workspaces WHERE id = ${id}`.pipe(Sql.orDefect)
        yield* failedJob(job)
      }
    }
    return toWorkspaceInfo(yield* find(owner, id))
  })

  const remove = Effect.fn("Workspaces.remove")(function* (owner: Owner, selector: string) {
    // A session just ended may still have its runtime on the disk (a browser writing its profile
    // out): waited for, 10 s at most.
    const target = yield* find(owner, selector)
    const released = sql<{ readonly mounted_by: string | null }>`
      SELECT mounted_by FROM workspaces WHERE id = ${target.id}`.pipe(
      Sql.orDefect,
      Effect.map(([held]) => held?.mounted_by == null || target.active_session_id !== null)
    )
    yield* released.pipe(
      Effect.repeat({ until: (free) => free, schedule: Schedule.spaced("100 millis") }),
      Effect.timeoutOption("10 seconds")
    )
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
    if (removed.row.node_id === nodeId) yield* disks.disk.remove(removed.row.id)
  })

  const bulkDelete = Effect.fn("Workspaces.bulkDelete")(function* (
    owner: Owner,
    input: BulkDeleteWorkspacesRequest
  ) {
    const deleted: Array<string> = []
    const skipped: Array<{ workspace: string; code: string; message: string }> = []
    for (const selector of input.workspaces) {
      const done = yield* Effect.result(remove(owner, selector))
      if (done._tag === "Success") deleted.push(selector)
      else skipped.push({ workspace: selector, code: done.failure.code, message: done.failure.message })
    }
    return { deleted, skipped }
  })

  return { create, remove, bulkDelete }
}
