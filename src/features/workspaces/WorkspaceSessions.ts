import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Placement } from "../../platform/cluster/Placement.ts"
import { ServiceConfig } from "../../platform/config/Config.ts"
import { isUuid } from "../../kernel/Ids.ts"
import type { SessionType } from "../../kernel/Session.ts"
import { type StorageLimitReached, WorkspaceConflict, WorkspaceNotFound } from "../../kernel/Workspace.ts"
import { checkStorage, selectWorkspaces, type WorkspaceRow } from "./WorkspaceRows.ts"

/** What `POST /v1/sessions` needs of the workspace it names. */
export interface SessionWorkspace {
  readonly id: string
  readonly sessionType: SessionType | null
  readonly image: string | null
  readonly persistence: boolean
  /** The node that must run the session (its disk is there and it lives), or none: any node. */
  readonly node: string | undefined
}

/**
 * The workspace a session is created on: the account's, not a template, not
 * held by a job, without another open session (the sessions table's unique
 * index has the last word on a race), the account's storage not full; and
 * where the session must run: the node holding its disk while that node
 * lives, else any node (the disk is then made there from its newest snapshot).
 */
export class WorkspaceSessions extends Context.Service<
  WorkspaceSessions,
  {
    readonly open: (
      accountId: string,
      selector: string,
      status?: "ready" | "importing"
    ) => Effect.Effect<SessionWorkspace, WorkspaceNotFound | WorkspaceConflict | StorageLimitReached>
  }
>()("rbs/workspaces/WorkspaceSessions") {
  static readonly layer = Layer.effect(
    WorkspaceSessions,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const config = yield* ServiceConfig
      const placement = yield* Placement
      const select = selectWorkspaces(sql, config.nodeId, config.nodeUrl)

      const open = (accountId: string, selector: string, status: "ready" | "importing" = "ready") =>
        Effect.gen(function* () {
          const [row] = yield* sql<WorkspaceRow>`${select} WHERE w.account_id = ${accountId}
            AND ${isUuid(selector) ? sql`w.id = ${selector}::uuid` : sql`w.name = ${selector}`}`.pipe(
            Effect.orDie
          )
          if (row === undefined) return yield* new WorkspaceNotFound()
          if (row.template)
            return yield* new WorkspaceConflict({
              detail:
                "The workspace is a template: sessions cannot open it. Clone it (clone_from) and open the clone."
            })
          if (row.status !== status)
            return yield* new WorkspaceConflict({
              detail: `The workspace is ${row.status}: wait for it to finish.`
            })
          if (row.active_session_id !== null)
            return yield* new WorkspaceConflict({
              detail: `The workspace has an open session (${row.active_session_id}): end it first.`
            })
          yield* checkStorage(sql, accountId, config.limits.workspaceStorageMb)
          const live = row.node_id === null ? false : yield* placement.isLive(row.node_id)
          return {
            id: row.id,
            sessionType: row.session_type,
            image: row.image,
            persistence: row.persistence,
            node: live && row.node_id !== null ? row.node_id : undefined
          } satisfies SessionWorkspace
        })

      return WorkspaceSessions.of({ open })
    })
  )
}
