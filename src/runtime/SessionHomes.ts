import { Context, type Effect, type Scope } from "effect"
import type { RuntimeLaunchError } from "./SessionRuntime.ts"

/** What a session on a workspace runs on. */
export interface HomeRequest {
  readonly sessionId: string
  readonly workspaceId: string
  /** Keep the session's changes, or work on a copy dropped at its end. */
  readonly persistence: boolean
}

/**
 * Where a session's home directory comes from: a workspace's disk, made on
 * this node if needed and taken for the caller's scope (the runtime's). The
 * session's actor mounts it and hands the directory to the runtime
 * (`LaunchSpec.home`); workspaces implement it, the composition root wires it.
 */
export class SessionHomes extends Context.Service<
  SessionHomes,
  {
    readonly mount: (request: HomeRequest) => Effect.Effect<string, RuntimeLaunchError, Scope.Scope>
  }
>()("rbs/runtime/SessionHomes") {}
