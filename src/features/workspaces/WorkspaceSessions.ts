import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { Placement } from "../../platform/cluster/Placement.ts"
import { ServiceConfig } from "../../platform/config/Config.ts"
import { isUuid } from "../../kernel/Ids.ts"
import { type SessionWorkspace, SessionWorkspaces } from "../sessions/SessionWorkspaces.ts"
import { WorkspaceConflict, WorkspaceNotFound } from "../../kernel/Workspace.ts"
import { checkStorage, selectWorkspaces, type WorkspaceRow } from "./WorkspaceRows.ts"
import { LimitsConfig } from "../limits/LimitsConfig.ts"

/**
 * The workspace a session is created on: the account's, not a template, not
 * held by a job, without another open session (the sessions table's unique
 * index has the last word on a race), the account's storage not full; and
 * where the session must run: the node holding its disk while that node
 * lives, else any node (the disk is then made there from its newest snapshot).
 */
export const layer = Layer.effect(
  SessionWorkspaces,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* ServiceConfig
    const limits = yield* LimitsConfig
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
        yield* checkStorage(sql, accountId, limits.workspaceStorageMb)
        const live = row.node_id === null ? false : yield* placement.isLive(row.node_id)
        return {
          id: row.id,
          sessionType: row.session_type,
          image: row.image,
          persistence: row.persistence,
          node: live && row.node_id !== null ? row.node_id : undefined
        } satisfies SessionWorkspace
      })

    return SessionWorkspaces.of({
      open,
      lock: (workspaceId) =>
        sql<{
          readonly status: string
        }>`SELECT status FROM workspaces WHERE id = ${workspaceId} FOR UPDATE`.pipe(
          Effect.orDie,
          Effect.map((rows) => Option.fromNullishOr(rows[0]?.status))
        ),
      settleType: (workspaceId, sessionType) =>
        sql`UPDATE workspaces SET session_type = ${sessionType}
          WHERE id = ${workspaceId} AND session_type IS NULL`.pipe(Effect.asVoid, Effect.orDie)
    })
  })
)
