import { Context, Effect, type Option } from "effect"
import type { Owner } from "../../kernel/Owner.ts"
import type { CreateSessionRequest } from "../../kernel/Session.ts"
import type { CreateOptions } from "../sessions/CreateSession.ts"
import type { Sessions } from "../sessions/Sessions.ts"
import type { RuntimeFor } from "../sessions/Sessions.ts"
import { JobFailed, type JobRun } from "./JobKind.ts"

/**
 * A fresh session for one attempt, on the node running it, created as
 * `POST /v1/sessions` creates one (the owner's balance, limits and key;
 * billed as any session), and its runtime reached through the session door.
 * The session ends (`client_delete`) when the attempt's scope closes,
 * whatever became of the attempt: succeeded, failed, timed out or cancelled.
 *
 * What refuses it: no room on this node, or the account at its concurrency
 * or rate limit, defers the attempt (tried again soon, not counted); a
 * balance at zero, or a kind no node runs (`session_type_unavailable`), fails the job.
 */
export const freshSession = <K extends "cdp" | "sandbox">(
  sessions: Sessions["Service"],
  run: JobRun,
  kind: K,
  request: CreateSessionRequest,
  options: Omit<CreateOptions, "node"> = {}
) =>
  Effect.gen(function* () {
    // Created and its end registered together: an interrupt in between would leave it running, billed.
    const created = yield* Effect.acquireRelease(
      sessions.create(run.owner, request, { ...options, node: run.nodeId }),
      (session) => sessions.close(run.owner, session.id).pipe(Effect.ignore)
    ).pipe(
      Effect.mapError((error) => {
        switch (error._tag) {
          case "CapacityExhausted":
          case "ConcurrencyLimitReached":
          case "RateLimited":
            return new JobFailed({
              code: error._tag === "CapacityExhausted" ? "capacity_exhausted" : error.code,
              detail: `${error.message} The job waits and tries again.`,
              retryable: true,
              deferred: true
            })
          case "PaymentRequired":
          // No node runs the kind: waiting would not cure it.
          case "SessionKindUnavailable":
            return new JobFailed({ code: error.code, detail: error.message, retryable: false })
          default:
            return new JobFailed({ code: "invalid_input", detail: error.message, retryable: false })
        }
      })
    )
    yield* run.usesSession(created.id)
    const connection = yield* sessions.connect(run.owner, created.id, kind).pipe(
      Effect.mapError(
        (error) =>
          new JobFailed({
            code: "runtime_failed",
            detail: `The job's session ${created.id} did not start: ${error.message}`,
            retryable: true
          })
      )
    )
    return { sessionId: created.id, runtime: connection.runtime as RuntimeFor<K> }
  })

/** The live node holding a workspace's disk, or null (none yet, or gone: any node will do). */
export type DiskNode = (owner: Owner, selector: string) => Effect.Effect<string | null>

/**
 * Where the owner's workspaces are, for jobs that run on one: the workspaces
 * feature implements it, the composition root wires it.
 */
export class WorkspaceNodes extends Context.Service<
  WorkspaceNodes,
  {
    readonly diskNode: DiskNode
    /** `diskNode`, or none when the owner has no such workspace. */
    readonly locate: (owner: Owner, selector: string) => Effect.Effect<Option.Option<string | null>>
  }
>()("rbs/jobs/WorkspaceNodes") {}

/**
 * An attempt on a workspace runs where its disk is: claimed elsewhere (queued
 * before the disk had a node, or the disk moved since), it is handed there.
 */
export const onDiskNode = (diskNode: DiskNode, run: JobRun, workspace: string) =>
  Effect.gen(function* () {
    const node = yield* diskNode(run.owner, workspace)
    if (node !== null && node !== run.nodeId)
      return yield* new JobFailed({
        code: "moved",
        detail: "The workspace's disk is on another node: the job runs there.",
        retryable: true,
        deferred: true,
        deferMs: 100,
        pinTo: node
      })
  })
