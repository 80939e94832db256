import { type Effect, Schema, type Scope } from "effect"
import type { Owner, Scope as KeyScope } from "../../kernel/Owner.ts"
import type { RuntimeKind } from "../../kernel/Session.ts"

/**
 * Why an attempt failed: a `code` the job's `error` shows, words, and whether
 * another attempt may fare better (a page that did not answer, a node without
 * room) or not (a command that exited non-zero, a balance at zero).
 */
export class JobFailed extends Schema.TaggedError<JobFailed>()("JobFailed", {
  code: Schema.String,
  detail: Schema.String,
  retryable: Schema.Boolean,
  /** No room on the node that claimed it: tried again soon, and the attempt does not count. */
  deferred: Schema.optional(Schema.Boolean),
  /** A deferral's wait (default `DEFER_MS`, 5 s); given, it grows with each deferral. */
  deferMs: Schema.optional(Schema.Number),
  /** A deferral to the node that must run it (where the workspace's disk is now). */
  pinTo: Schema.optional(Schema.String)
}) {
  override get message() {
    return this.detail
  }
}

/** Bytes an attempt made: a file in its work dir, moved into the blob store when it succeeds. */
export interface JobFile {
  readonly path: string
  readonly contentType: string
}

export interface JobOutput {
  /** The job's `result` (JSON). */
  readonly result: unknown
  readonly file?: JobFile | undefined
}

/** One attempt of a job, as its kind sees it. */
export interface JobRun {
  readonly id: string
  /** Who created the job: it acts as them (their balance, limits, key). */
  readonly owner: Owner
  readonly attempt: number
  /** The node running it: the sessions it makes are placed here. */
  readonly nodeId: string
  /** A directory of the attempt's own, removed after it. */
  readonly workDir: string
  /** Records the session the attempt runs in (`session_id`), before it is used. */
  readonly usesSession: (sessionId: string) => Effect.Effect<void>
}

/**
 * A kind of job: its input (decoded, and published as JSON Schema), the
 * scopes a key needs to create one, the runtime it needs on the node that
 * runs it (a node without places of that kind claims none), a time limit per
 * attempt, and what an attempt does. What the attempt acquires in its scope
 * (a session) is released when it ends, succeeded, failed or cancelled.
 */
export interface JobKind<I = any> {
  readonly kind: string
  readonly description: string
  readonly input: Schema.Codec<I, any, never, any>
  readonly requires: ReadonlyArray<KeyScope>
  readonly runtime: RuntimeKind | null
  readonly timeoutSeconds: (input: I) => number
  readonly run: (input: I, job: JobRun) => Effect.Effect<JobOutput, JobFailed, Scope.Scope>
  /**
   * The workspace (name or id) the job works on, if any: the job is then run
   * on the node holding its disk while that node lives.
   */
  readonly workspace?: ((input: I) => string | undefined) | undefined
  /** Queued by the service itself (a clone for `POST /v1/workspaces`), never by `POST /v1/jobs`, and not listed. */
  readonly internal?: boolean | undefined
}

export const jobKind = <I>(kind: JobKind<I>): JobKind<I> => kind
