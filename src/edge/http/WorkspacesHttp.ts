import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { Workspaces } from "../../features/workspaces/Workspaces.ts"
import { WorkspaceImport } from "../../features/workspaces/WorkspaceImport.ts"
import { WorkspaceSnapshots } from "../../features/workspaces/WorkspaceSnapshots.ts"

export const WorkspacesHttp = HttpApiBuilder.group(
  Api,
  "workspaces",
  Effect.fn(function* (handlers) {
    const workspaces = yield* Workspaces
    const snapshots = yield* WorkspaceSnapshots
    const imports = yield* WorkspaceImport
    const owner = Effect.service(CurrentOwner)
    return handlers
      .handle("create", ({ payload }) => Effect.flatMap(owner, (o) => workspaces.create(o, payload ?? {})))
      .handle("import", ({ payload }) => Effect.flatMap(owner, (o) => imports.importRepo(o, payload)))
      .handle("list", () =>
        Effect.flatMap(owner, (o) =>
          Effect.map(workspaces.list(o), (data) => ({ object: "list" as const, data }))
        )
      )
      .handle("get", ({ params }) => Effect.flatMap(owner, (o) => workspaces.get(o, params.workspace)))
      .handle("rename", ({ params, payload }) =>
        Effect.flatMap(owner, (o) => workspaces.rename(o, params.workspace, payload.name ?? null))
      )
      .handle("template", ({ params, payload }) =>
        Effect.flatMap(owner, (o) => workspaces.setTemplate(o, params.workspace, payload?.template))
      )
      .handle("delete", ({ params }) => Effect.flatMap(owner, (o) => workspaces.remove(o, params.workspace)))
      .handle("bulkDelete", ({ payload }) => Effect.flatMap(owner, (o) => workspaces.bulkDelete(o, payload)))
      .handle("snapshot", ({ params, payload }) =>
        Effect.flatMap(owner, (o) => snapshots.snapshot(o, params.workspace, payload?.name))
      )
      .handle("snapshots", ({ params }) =>
        Effect.flatMap(owner, (o) =>
          Effect.map(snapshots.snapshots(o, params.workspace), (data) => ({ object: "list" as const, data }))
        )
      )
      .handle("restore", ({ params }) =>
        Effect.flatMap(owner, (o) => snapshots.restore(o, params.workspace, params.name))
      )
      .handle("deleteSnapshot", ({ params }) =>
        Effect.flatMap(owner, (o) => snapshots.removeSnapshot(o, params.workspace, params.name))
      )
  })
)
