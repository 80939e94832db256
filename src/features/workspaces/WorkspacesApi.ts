import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import {
  Forbidden,
  InvalidField,
  RateLimited,
  ResourceLimitReached,
  ServiceUnavailable
} from "../../kernel/Errors.ts"
import {
  BulkDeleteWorkspacesRequest,
  BulkDeleteWorkspacesResult,
  CreateWorkspaceRequest,
  ImportFailed,
  ImportWorkspaceRequest,
  SnapshotNotFound,
  StorageLimitReached,
  WorkspaceConflict,
  WorkspaceInfo,
  WorkspaceList,
  WorkspaceNotFound,
  WorkspaceSnapshotInfo,
  WorkspaceSnapshotList
} from "../../kernel/Workspace.ts"
import { PerAccountRateLimit, RouteRateLimit } from "../limits/LimitsMiddleware.ts"

const workspace = { workspace: Schema.String }
const snapshot = { workspace: Schema.String, name: Schema.String }
const SELECTOR = "`{workspace}` is a workspace's name (preferred) or id."

export class WorkspacesApi extends HttpApiGroup.make("workspaces")
  .add(
    HttpApiEndpoint.post("create", "/v1/workspaces", {
      payload: [CreateWorkspaceRequest, Schema.Null],
      success: WorkspaceInfo,
      error: [
        InvalidField.Wire,
        WorkspaceNotFound.Wire,
        WorkspaceConflict.Wire,
        StorageLimitReached.Wire,
        RateLimited.Wire,
        SnapshotNotFound.Wire,
        ServiceUnavailable.Wire,
        ResourceLimitReached.Wire
      ]
    })
      .annotateMerge(requires("workspaces.write", "any", audits("workspace.created", "workspace")))
      .annotate(PerAccountRateLimit, "workspace_write")
      .annotate(
        OpenApi.Description,
        "Creates a workspace: `name` (a slug, unique in the account; generated as two words and digits when omitted; 409 `workspace_conflict` when taken), `session_type`, `image` (sandbox workspaces only: 400 `invalid_field` on a browser one), `template` (sessions cannot open a template, only clone it), `persistence` (an extension, default true), `clone_from` (a workspace or template of the account, by name or id: its content is copied, a reflink where the filesystem has them, on the node that holds it; 404 `workspace_not_found` for another account's). Its disk is made on the node of its first session. 402 `storage_limit_reached` when the account's workspaces and snapshots hold `WORKSPACE_STORAGE_MB_PER_ACCOUNT`; 409 `resource_limit` when it has `LIMIT_WORKSPACES_PER_ACCOUNT` workspaces (default 100, assistants' homes included) already."
      ),
    HttpApiEndpoint.post("import", "/v1/workspaces/import", {
      payload: ImportWorkspaceRequest,
      success: WorkspaceInfo,
      error: [
        InvalidField.Wire,
        Forbidden.Wire,
        WorkspaceNotFound.Wire,
        WorkspaceConflict.Wire,
        StorageLimitReached.Wire,
        ImportFailed.Wire,
        RateLimited.Wire,
        SnapshotNotFound.Wire,
        ServiceUnavailable.Wire,
        ResourceLimitReached.Wire
      ]
    })
      .annotateMerge(requires("workspaces.write", "any", audits("workspace.imported", "workspace")))
      .annotate(PerAccountRateLimit, "workspace_write")
      .annotate(
        OpenApi.Description,
        "Imports a public git repository into a new sandbox workspace: `url` (http or https, without credentials or a query: 400 `invalid_field`, so that none is kept in the job, the workspace or its snapshots), `ref` (a branch, tag or commit; default the remote's HEAD), `name` (default the repository's name when free, else generated). An `import` job runs `git clone` inside a sandbox session on the workspace, through its metering egress proxy: the SSRF guard and billing apply. Answers when the clone is done, with `github_repo` set; 400 `import_failed` with git's words when it could not clone (the workspace is not kept). Needs `sessions.write` and `exec.write` besides `workspaces.write`. Its workspace counts in `LIMIT_WORKSPACES_PER_ACCOUNT` as a create's (409 `resource_limit`)."
      ),
    HttpApiEndpoint.get("list", "/v1/workspaces", { success: WorkspaceList })
      .annotateMerge(requires("workspaces.read"))
      .annotate(OpenApi.Description, "The active account's workspaces, newest first."),
    HttpApiEndpoint.get("get", "/v1/workspaces/:workspace", {
      params: workspace,
      success: WorkspaceInfo,
      error: WorkspaceNotFound.Wire
    })
      .annotateMerge(requires("workspaces.read"))
      .annotate(OpenApi.Description, `A workspace (an extension). ${SELECTOR}`),
    HttpApiEndpoint.put("rename", "/v1/workspaces/:workspace/name", {
      params: workspace,
      payload: Schema.Struct({ name: Schema.optionalKey(Schema.NullOr(Schema.String)) }),
      success: Schema.Struct({ id: Schema.String, name: Schema.NullOr(Schema.String) }),
      error: [InvalidField.Wire, WorkspaceNotFound.Wire, WorkspaceConflict.Wire, RateLimited.Wire]
    })
      .annotateMerge(
        requires("workspaces.write", "any", audits("workspace.renamed", "workspace", "workspace"))
      )
      .annotate(PerAccountRateLimit, "workspace_write")
      .annotate(
        OpenApi.Description,
        `Renames a workspace. A workspace always has a name: null or empty gives it a new generated one. 409 \`workspace_conflict\` when the name is taken. ${SELECTOR}`
      ),
    HttpApiEndpoint.put("template", "/v1/workspaces/:workspace/template", {
      params: workspace,
      payload: [Schema.Struct({ template: Schema.optionalKey(Schema.Boolean) }), Schema.Null],
      success: WorkspaceInfo,
      error: [WorkspaceNotFound.Wire, WorkspaceConflict.Wire, RateLimited.Wire]
    })
      .annotateMerge(
        requires("workspaces.write", "any", audits("workspace.template_set", "workspace", "workspace"))
      )
      .annotate(PerAccountRateLimit, "workspace_write")
      .annotate(
        OpenApi.Description,
        `Sets \`template\` (the body's), or toggles it (no body). A workspace with an open session cannot become a template (409). ${SELECTOR}`
      ),
    HttpApiEndpoint.delete("delete", "/v1/workspaces/:workspace", {
      params: workspace,
      success: HttpApiSchema.NoContent,
      error: [WorkspaceNotFound.Wire, WorkspaceConflict.Wire, RateLimited.Wire]
    })
      .annotateMerge(
        requires("workspaces.write", "any", audits("workspace.deleted", "workspace", "workspace"))
      )
      .annotate(PerAccountRateLimit, "workspace_write")
      .annotate(
        OpenApi.Description,
        `Deletes a workspace, its disk and its snapshots. 409 \`workspace_conflict\` while a session is open on it or a job works on it. ${SELECTOR}`
      ),
    HttpApiEndpoint.post("bulkDelete", "/v1/workspaces/bulk-delete", {
      payload: BulkDeleteWorkspacesRequest,
      success: BulkDeleteWorkspacesResult,
      error: [InvalidField.Wire, RateLimited.Wire]
    })
      .annotateMerge(requires("workspaces.write", "any", audits("workspace.deleted", "workspace")))
      .annotate(PerAccountRateLimit, "workspace_write")
      .annotate(
        OpenApi.Description,
        "Deletes up to 100 workspaces (`workspaces`: names or ids), each as DELETE would; those it could not delete are in `skipped` with the error's code and message."
      ),
    HttpApiEndpoint.post("snapshot", "/v1/workspaces/:workspace/snapshots", {
      params: workspace,
      payload: [Schema.Struct({ name: Schema.optionalKey(Schema.NullOr(Schema.String)) }), Schema.Null],
      success: WorkspaceSnapshotInfo,
      error: [
        InvalidField.Wire,
        WorkspaceNotFound.Wire,
        WorkspaceConflict.Wire,
        StorageLimitReached.Wire,
        RateLimited.Wire,
        SnapshotNotFound.Wire,
        ServiceUnavailable.Wire
      ]
    })
      .annotateMerge(
        requires("workspaces.write", "any", audits("snapshot.created", "workspace", "workspace"))
      )
      .annotate(PerAccountRateLimit, "workspace_write")
      .annotate(
        OpenApi.Description,
        `Archives the workspace (tar + zstd) into the blob store as a snapshot \`name\` (a slug, unique in the workspace; generated when omitted), with a \`snapshot\` job on the node that holds its disk, and answers once it is written. 409 \`workspace_conflict\` while a session is open on it (end it first, or create a \`snapshot\` job, which waits for the session's end) or when the name is taken; 402 \`storage_limit_reached\` when the account's storage is full. ${SELECTOR}`
      ),
    HttpApiEndpoint.get("snapshots", "/v1/workspaces/:workspace/snapshots", {
      params: workspace,
      success: WorkspaceSnapshotList,
      error: WorkspaceNotFound.Wire
    })
      .annotateMerge(requires("workspaces.read"))
      .annotate(OpenApi.Description, `The workspace's snapshots, newest first. ${SELECTOR}`),
    HttpApiEndpoint.post("restore", "/v1/workspaces/:workspace/snapshots/:name/restore", {
      params: snapshot,
      success: WorkspaceSnapshotInfo,
      error: [
        WorkspaceNotFound.Wire,
        SnapshotNotFound.Wire,
        WorkspaceConflict.Wire,
        RateLimited.Wire,
        ServiceUnavailable.Wire
      ]
    })
      .annotateMerge(
        requires("workspaces.write", "any", audits("snapshot.restored", "workspace", "workspace"))
      )
      .annotate(PerAccountRateLimit, "workspace_write")
      .annotate(
        OpenApi.Description,
        `Replaces the workspace's content with the snapshot's, atomically (a restore stopped halfway leaves the old content), with a \`restore\` job, and answers once done (\`restored_at\` set). 404 \`snapshot_not_found\`; 409 \`workspace_conflict\` while a session is open on it. ${SELECTOR}`
      ),
    HttpApiEndpoint.delete("deleteSnapshot", "/v1/workspaces/:workspace/snapshots/:name", {
      params: snapshot,
      success: HttpApiSchema.NoContent,
      error: [WorkspaceNotFound.Wire, SnapshotNotFound.Wire, RateLimited.Wire, WorkspaceConflict.Wire]
    })
      .annotateMerge(
        requires("workspaces.write", "any", audits("snapshot.deleted", "workspace", "workspace"))
      )
      .annotate(PerAccountRateLimit, "workspace_write")
      .annotate(OpenApi.Description, `Deletes a snapshot and its archive. ${SELECTOR}`)
  )
  .middleware(RouteRateLimit)
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Workspaces") {}
