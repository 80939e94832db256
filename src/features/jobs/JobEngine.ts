import { Cause, Effect, Fiber, FiberSet, Layer, Queue, Schema } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as DataDir from "../../platform/files/DataDir.ts"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import { NodeDrain } from "../../platform/cluster/NodeDrain.ts"
import { NodeConfig } from "../../platform/config/Config.ts"
import { JobsConfig } from "./JobsConfig.ts"
import { OwnerSchema } from "../../kernel/Owner.ts"
import { ACCOUNT_ID } from "../../platform/observability/Tracing.ts"
import { RuntimePools } from "../../runtime/RuntimePools.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import * as Wake from "../../platform/work/Wake.ts"
import { JobFailed } from "./JobKind.ts"
import { JobKinds } from "./JobKinds.ts"
import * as JobQueue from "./JobQueue.ts"
import type { Claimed } from "./JobQueue.ts"
import { Nodes } from "../../platform/cluster/Nodes.ts"
import { LimitsConfig } from "../limits/LimitsConfig.ts"

/** Commits that queue a job notify this channel: every node's engine looks at once. */
export const WAKE_CHANNEL = "rbs_jobs"
/** A cancel notifies this channel with the job's id: the node running it interrupts it. */
export const CANCEL_CHANNEL = "rbs_job_cancel"
/** With jobs waiting for their time, the engine looks again this often besides every wake-up. */
const POLL_MS = 1_000
/** With none waiting only a commit makes work, and commits notify: this poll is a safety net. */
const IDLE_POLL_MS = 30_000

/** The blob an attempt's result bytes are kept under (its own: a late attempt cannot remove a newer one's). */
export const resultKey = (jobId: string, attempt: number) => `jobs/${jobId}/${attempt}`

const decodeOwner = Schema.decodeUnknownEffect(OwnerSchema)

/**
 * The job engine, on every node: a supervised fiber claims due jobs of the
 * kinds this node has room for (`FOR UPDATE SKIP LOCKED`, a lease renewed
 * four times a lease while the job runs, at most `LIMIT_JOBS_PER_NODE` here and
 * `LIMIT_CONCURRENT_JOBS` per account across nodes), records each attempt
 * before running it, runs it in a scope of its own (its session, its work
 * dir) within its kind's time limit, moves its result into the blob store,
 * and records the outcome guarded by the lease. A cancel (`NOTIFY` on
 * `CANCEL_CHANNEL`, or a renewal that finds the job no longer ours)
 * interrupts the attempt's fiber, which ends its session. A node that stops
 * hands its running jobs back (due at once elsewhere); one that dies leaves
 * them to the lease: the next claim counts the attempt abandoned. A draining
 * node claims nothing new.
 */
export const layer = Layer.effectDiscard(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = { ...(yield* NodeConfig), ...(yield* JobsConfig) }
    const kinds = yield* JobKinds
    const blobs = yield* BlobStore
    const pools = yield* RuntimePools
    const drain = yield* NodeDrain
    const outbox = yield* WebhookOutbox
    const worker = `${config.nodeId}/${Crypto.randomUUID().slice(0, 8)}`
    const limits = yield* LimitsConfig
    const nodes = yield* Nodes
    const concurrency = limits.jobsPerNode
    const queue = JobQueue.make({
      sql,
      outbox,
      nodeId: config.nodeId,
      worker,
      perAccount: limits.concurrentJobs,
      leaseMs: config.jobLeaseMs,
      liveNodes: nodes.liveSince,
      placeableWithinMs: config.clusterTimings.placeableWithinMs
    })
    const workRoot = Path.join(config.dataDir, "tmp", "jobs")
    // What a previous process left mid-attempt: its attempts are over.
    yield* Effect.promise(() => Fs.rm(workRoot, { recursive: true, force: true }))
    yield* queue.reclaimOwn

    const wake = yield* Queue.sliding<void>(1)
    const attempts = yield* FiberSet.make()
    /** Running attempts by job id; `cancelled` once a cancel asked it to stop before its fiber was known. */
    const running = new Map<string, { fiber: Fiber.Fiber<void> | undefined; cancelled: boolean }>()

    /** Kinds this node has room for: none needing a kind of session it has no places for. */
    const claimable = () =>
      kinds.all
        .filter((kind) => kind.runtime === null || pools.of(kind.runtime).capacity > 0)
        .map((kind) => kind.kind)

    const stop = (jobId: string) =>
      Effect.suspend(() => {
        const entry = running.get(jobId)
        if (entry === undefined) return Effect.void
        entry.cancelled = true
        return entry.fiber === undefined
          ? Effect.void
          : Effect.asVoid(Effect.forkDetach(Fiber.interrupt(entry.fiber)))
      })

    const run = (claimed: Claimed) =>
      Effect.gen(function* () {
        const kind = kinds.get(claimed.kind)
        if (kind === undefined)
          return yield* new JobFailed({
            code: "unknown_kind",
            detail: `No node runs jobs of kind ${claimed.kind} any more.`,
            retryable: false
          })
        const input = yield* Schema.decodeUnknownEffect(kind.input)(claimed.input).pipe(
          Effect.mapError(
            (error) => new JobFailed({ code: "invalid_input", detail: error.message, retryable: false })
          )
        )
        const owner = yield* decodeOwner(claimed.owner).pipe(Sql.orDefect)
        const workDir = Path.join(workRoot, `${claimed.id}-${claimed.attempts}`)
        yield* Effect.acquireRelease(
          Effect.promise(() => DataDir.makePrivate(workDir, config.dataDir)),
          () => Effect.promise(() => Fs.rm(workDir, { recursive: true, force: true }))
        )
        const output = yield* kind
          .run(input, {
            id: claimed.id,
            owner,
            attempt: claimed.attempts,
            nodeId: config.nodeId,
            workDir,
            usesSession: (sessionId) => queue.usesSession(claimed, sessionId)
          })
          .pipe(
            Effect.scoped,
            Effect.timeoutOrElse({
              duration: kind.timeoutSeconds(input) * 1000,
              orElse: () =>
                Effect.fail(
                  new JobFailed({
                    code: "timeout",
                    detail: `The attempt took longer than its ${kind.timeoutSeconds(input)} s.`,
                    retryable: true
                  })
                )
            })
          )
        const stored =
          output.file === undefined
            ? undefined
            : {
                key: resultKey(claimed.id, claimed.attempts),
                contentType: output.file.contentType,
                bytes: (yield* blobs.putFile(resultKey(claimed.id, claimed.attempts), output.file.path)).bytes
              }
        const kept = yield* queue.succeed(claimed, output.result, stored)
        // Cancelled meanwhile: nothing of it is kept.
        if (!kept && stored !== undefined) yield* blobs.remove(stored.key)
      }).pipe(
        Effect.scoped,
        Effect.catchTag("JobFailed", (failure) => queue.fail(claimed, failure)),
        Effect.catchCause((cause) =>
          Cause.hasInterruptsOnly(cause)
            ? Effect.failCause(cause)
            : Effect.logError("job.attempt_failed", { jobId: claimed.id, cause }).pipe(
                Effect.andThen(
                  queue.fail(
                    claimed,
                    new JobFailed({
                      code: "runtime_failed",
                      detail: "The attempt failed inside the service; it is tried again.",
                      retryable: true
                    })
                  )
                )
              )
        ),
        // Stopped by the service (not a cancel: that one is already written): due again at once.
        Effect.onInterrupt(() => queue.release(claimed)),
        Effect.withSpan("job.attempt", {
          attributes: {
            [ACCOUNT_ID]: claimed.account_id,
            "rbs.job.id": claimed.id,
            "rbs.job.kind": claimed.kind,
            "rbs.job.attempt": claimed.attempts
          }
        }),
        Effect.ensuring(
          Effect.suspend(() => {
            running.delete(claimed.id)
            return Queue.offer(wake, undefined)
          })
        )
      )

    const start = (claimed: Claimed) =>
      Effect.gen(function* () {
        const entry = { fiber: undefined as Fiber.Fiber<void> | undefined, cancelled: false }
        running.set(claimed.id, entry)
        entry.fiber = yield* FiberSet.run(attempts, run(claimed))
        if (entry.cancelled) yield* stop(claimed.id)
      })

    const loop = Effect.gen(function* () {
      const room = drain.leaving() ? 0 : concurrency - running.size
      const claimed = room > 0 ? yield* queue.claim(room, claimable()) : []
      for (const each of claimed) yield* start(each)
      if (claimed.length === 0 || running.size >= concurrency) {
        const idle = listener.listening() && running.size === 0 && !(yield* queue.waiting)
        yield* Effect.raceFirst(Queue.take(wake), Wake.pollPause(idle ? IDLE_POLL_MS : POLL_MS))
      }
    }).pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logError("job.claim_failed", { cause }).pipe(Effect.andThen(Wake.pollPause(POLL_MS)))
      ),
      Effect.forever
    )

    // The leases of what runs here; a job no longer ours (cancelled, or taken over) is stopped.
    const renew = Effect.gen(function* () {
      yield* Wake.pollPause(config.jobLeaseMs / 4)
      const ids = [...running.keys()]
      const kept = yield* queue.renew(ids)
      for (const id of ids) if (!kept.has(id)) yield* stop(id)
    }).pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logError("job.renew_failed", { cause })
      ),
      Effect.forever
    )

    const listener = yield* Wake.listen(WAKE_CHANNEL, wake)
    yield* Wake.listen(CANCEL_CHANNEL, yield* Queue.sliding<void>(1), stop)
    yield* Effect.forkScoped(loop)
    yield* Effect.forkScoped(renew)
  })
)
