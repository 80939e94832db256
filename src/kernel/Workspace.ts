import { Schema } from "effect"
import { wire } from "./ApiError.ts"
import { SessionType } from "./Session.ts"

/** A workspace name: a lowercase slug, 1 to 63 characters, unique in its account. */
export const SLUG = /^[a-z0-9]+(?:-[a-z0-9]+)*$/
export const isSlug = (name: string) => name.length <= 63 && SLUG.test(name)

export const WORKSPACE_STATUSES = ["ready", "cloning", "restoring", "snapshotting", "importing"] as const

/** WorkspaceInfo, and `used_bytes` (an extension). */
export const WorkspaceInfo = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  created_at: Schema.DateFromString,
  persistence: Schema.Boolean.annotate({
    description:
      "Whether a session on it keeps its changes unless it says otherwise (`persistence` on create)."
  }),
  active_session_id: Schema.NullOr(Schema.String),
  last_session_id: Schema.NullOr(Schema.String),
  assistant_home: Schema.Boolean,
  github_repo: Schema.NullOr(Schema.String),
  image: Schema.NullOr(Schema.String),
  node_endpoint: Schema.NullOr(Schema.String).annotate({
    description: "The node whose disk holds it (its URL); null until a session or a clone made its disk."
  }),
  session_type: Schema.NullOr(SessionType),
  source_workspace_id: Schema.NullOr(Schema.String),
  status: Schema.NullOr(Schema.Literals(WORKSPACE_STATUSES)).annotate({
    description: "`ready`, or `cloning` / `restoring` / `snapshotting` / `importing` while a job works on it."
  }),
  template: Schema.Boolean,
  used_bytes: Schema.Number.annotate({ description: "Its disk's size when last measured (an extension)." })
})
export type WorkspaceInfo = typeof WorkspaceInfo.Type

export const WorkspaceList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(WorkspaceInfo)
})

/** WorkspaceSnapshotInfo, and its `name` (an extension: snapshots are addressed by it). */
export const WorkspaceSnapshotInfo = Schema.Struct({
  id: Schema.String,
  workspace_id: Schema.String,
  name: Schema.String,
  created_at: Schema.DateFromString,
  used_bytes: Schema.Number.annotate({ description: "The archive's size in the blob store (tar + zstd)." }),
  restored_at: Schema.NullOr(Schema.DateFromString)
})
export type WorkspaceSnapshotInfo = typeof WorkspaceSnapshotInfo.Type

export const WorkspaceSnapshotList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(WorkspaceSnapshotInfo)
})

export const CreateWorkspaceRequest = Schema.Struct({
  clone_from: Schema.optionalKey(Schema.NullOr(Schema.String)),
  image: Schema.optionalKey(Schema.NullOr(Schema.String)),
  name: Schema.optionalKey(Schema.NullOr(Schema.String)),
  session_type: Schema.optionalKey(Schema.NullOr(SessionType)),
  template: Schema.optionalKey(Schema.NullOr(Schema.Boolean)),
  persistence: Schema.optionalKey(Schema.NullOr(Schema.Boolean))
})
export type CreateWorkspaceRequest = typeof CreateWorkspaceRequest.Type

export const BulkDeleteWorkspacesRequest = Schema.Struct({
  workspaces: Schema.Array(Schema.String).check(Schema.isMinLength(1), Schema.isMaxLength(100))
})
export type BulkDeleteWorkspacesRequest = typeof BulkDeleteWorkspacesRequest.Type

export const BulkDeleteWorkspacesResult = Schema.Struct({
  deleted: Schema.Array(Schema.String),
  skipped: Schema.Array(
    Schema.Struct({ workspace: Schema.String, code: Schema.String, message: Schema.String })
  )
})

export class WorkspaceNotFound extends Schema.TaggedError<WorkspaceNotFound>()("WorkspaceNotFound", {}) {
  readonly status = 404
  readonly code = "workspace_not_found"
  override readonly message = "Workspace not found."
  static readonly Wire = wire(this, () => new WorkspaceNotFound())
}

export class SnapshotNotFound extends Schema.TaggedError<SnapshotNotFound>()("SnapshotNotFound", {}) {
  readonly status = 404
  readonly code = "snapshot_not_found"
  override readonly message = "Snapshot not found."
  static readonly Wire = wire(this, () => new SnapshotNotFound())
}

/** A name taken, a workspace with an open session, a template opened by a session. */
export class WorkspaceConflict extends Schema.TaggedError<WorkspaceConflict>()("WorkspaceConflict", {
  detail: Schema.String
}) {
  readonly status = 409
  readonly code = "workspace_conflict"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new WorkspaceConflict({ detail: message }))
}

/** The account's workspaces and snapshots hold `WORKSPACE_STORAGE_MB_PER_ACCOUNT` already. */
export class StorageLimitReached extends Schema.TaggedError<StorageLimitReached>()("StorageLimitReached", {
  detail: Schema.String
}) {
  readonly status = 402
  readonly code = "storage_limit_reached"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new StorageLimitReached({ detail: message }))
}

export const ImportWorkspaceRequest = Schema.Struct({
  url: Schema.String.annotate({
    description: "The repository's http or https URL, without credentials or a query (a public repository)."
  }),
  ref: Schema.optionalKey(
    Schema.NullOr(
      Schema.String.annotate({ description: "A branch, tag or commit; default the remote's HEAD." })
    )
  ),
  name: Schema.optionalKey(Schema.NullOr(Schema.String))
})
export type ImportWorkspaceRequest = typeof ImportWorkspaceRequest.Type

/** The repository could not be cloned: git's own words (without any credentials of the URL). */
export class ImportFailed extends Schema.TaggedError<ImportFailed>()("ImportFailed", {
  detail: Schema.String
}) {
  readonly status = 400
  readonly code = "import_failed"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new ImportFailed({ detail: message }))
}
