import { Effect, Layer, Option } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import { type SessionWorkspace, SessionWorkspaces } from "../sessions/SessionWorkspaces.ts"
import { WorkspaceConflict } from "../../kernel/Workspace.ts"
import { SessionLogsRepo } from "../logs/SessionLogsRepo.ts"
import { checkStorage } from "./WorkspaceRows.ts"
import { WorkspaceStore } from "./WorkspaceStore.ts"
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
    const limits = yield* LimitsConfig
    const store = yield* WorkspaceStore
    const logs = yield* SessionLogsRepo

    const open = (accountId: string, selector: string, status: "ready" | "importing" = "ready") =>
      Effect.gen(function* () {
        const row = yield* store.findOf(accountId, selector)
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
        yield* checkStorage(sql, accountId, limits.workspaceStorageMb, logs.usedBytes)
        const node = yield* store.diskNode(row)
        return {
          id: row.id,
          sessionType: row.session_type,
          image: row.image,
          persistence: row.persistence,
          node: node ?? undefined
        } satisfies SessionWorkspace
      })

    return SessionWorkspaces.of({
      open,
      lock: (workspaceId) =>
        sql<{
          readonly status: string
        }>`SELECT status FROM workspaces WHERE id = ${workspaceId} FOR UPDATE`.pipe(
          Sql.orDefect,
          Effect.map((rows) => Option.fromNullishOr(rows[0]?.status))
        ),
      settleType: (workspaceId, sessionType) =>
        sql`UPDATE workspaces SET session_type = ${sessionType}
          WHERE id = ${workspaceId} AND session_type IS NULL`.pipe(Effect.asVoid, Sql.orDefect)
    })
  })
)
