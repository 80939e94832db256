import { Clock, Context, Effect, Layer } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import { Audit } from "../audit/Audit.ts"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import { InvalidField, type ResourceLimitReached } from "../../kernel/Errors.ts"
import type { Owner } from "../../kernel/Owner.ts"
import {
  type BulkDeleteWorkspacesRequest,
  type CreateWorkspaceRequest,
  isSlug,
  type StorageLimitReached,
  WorkspaceConflict,
  type WorkspaceInfo,
  type WorkspaceNotFound
} from "../../kernel/Workspace.ts"
import { Jobs } from "../jobs/Jobs.ts"
import { SessionKinds } from "../../runtime/SessionKinds.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import { generatedName, toWorkspaceInfo } from "./WorkspaceRows.ts"
import { WorkspaceDisks } from "./WorkspaceDisks.ts"
import { lifecycleCases } from "./WorkspaceLifecycle.ts"
import { type JobOutcomeError, type WorkspaceError, WorkspaceStore } from "./WorkspaceStore.ts"

export type { JobOutcomeError, WorkspaceError } from "./WorkspaceStore.ts"

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
      input: CreateWorkspaceRequest
    ) => Effect.Effect<
      WorkspaceInfo,
      InvalidField | JobOutcomeError | StorageLimitReached | ResourceLimitReached
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
      input: BulkDeleteWorkspacesRequest
    ) => Effect.Effect<{
      readonly deleted: ReadonlyArray<string>
      readonly skipped: ReadonlyArray<{ workspace: string; code: string; message: string }>
    }>
  }
>()("rbs/workspaces/Workspaces") {
  static readonly layer = Layer.effect(
    Workspaces,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const config = yield* NodeConfig
      const audit = yield* Audit
      const outbox = yield* WebhookOutbox
      const jobs = yield* Jobs
      const kinds = yield* SessionKinds
      const blobs = yield* BlobStore
      const disks = yield* WorkspaceDisks
      const store = yield* WorkspaceStore
      const { find, openSession } = store
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const list = (owner: Owner) => Effect.map(store.list(owner), (rows) => rows.map(toWorkspaceInfo))

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
            (error) => error.reason._tag === "UniqueViolation",
            () => Effect.succeed([])
          ),
          Sql.orDefect
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
          Sql.orDefect
        )
        yield* audit.record(owner, {
          action: "workspace.template_set",
          targetType: "workspace",
          targetId: row.id,
          details: { template: next }
        })
        return toWorkspaceInfo(yield* find(owner, row.id))
      })

      const { create, remove, bulkDelete } = lifecycleCases({
        ...store,
        sql,
        audit,
        jobs,
        blobs,
        outbox,
        kinds,
        disks,
        nodeId: config.nodeId
      })

      return Workspaces.of({ create, list, get, rename, setTemplate, remove, bulkDelete })
    })
  )
}
