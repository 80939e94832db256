import { Context, type Effect, type Option } from "effect"
import type { SessionType } from "../../kernel/Session.ts"
import type { StorageLimitReached, WorkspaceConflict, WorkspaceNotFound } from "../../kernel/Workspace.ts"

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
 * The workspaces sessions run on, as creating one needs them: the
 * workspaces feature implements it (`WorkspaceSessions`), the composition
 * root wires it.
 */
export class SessionWorkspaces extends Context.Service<
  SessionWorkspaces,
  {
    /**
     * The workspace a session is created on: the account's, not a template,
     * not held by a job, without another open session, the account's storage
     * not full; and where the session must run.
     */
    readonly open: (
      accountId: string,
      selector: string,
      status?: "ready" | "importing"
    ) => Effect.Effect<SessionWorkspace, WorkspaceNotFound | WorkspaceConflict | StorageLimitReached>
    /** Locks the workspace's row until the caller's transaction ends: its status, or none once it is gone. */
    readonly lock: (workspaceId: string) => Effect.Effect<Option.Option<string>>
    /** Its first session decides its kind: a profile and a home are not interchangeable. */
    readonly settleType: (workspaceId: string, sessionType: SessionType) => Effect.Effect<void>
  }
>()("rbs/sessions/SessionWorkspaces") {}
