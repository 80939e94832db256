import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Deferred, Effect, Exit, Fiber, Layer, Option, Redacted, Schema, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import * as Crypto from "node:crypto"
import { Audit } from "../../../src/features/audit/Audit.ts"
import { BlobStore } from "../../../src/platform/blobs/BlobStore.ts"
import { AccountBounds } from "../../../src/features/limits/AccountBounds.ts"
import { LimitsConfig } from "../../../src/features/limits/LimitsConfig.ts"
import { DrainWaits, NodeDrain } from "../../../src/platform/cluster/NodeDrain.ts"
import { placedSessions } from "../../../src/features/sessions/SessionsRepo.ts"
import { WorkspaceNodes } from "../../../src/features/jobs/JobSession.ts"
import { Nodes } from "../../../src/platform/cluster/Nodes.ts"
import { Placement } from "../../../src/platform/cluster/Placement.ts"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { JobsConfig } from "../../../src/features/jobs/JobsConfig.ts"
import { AuditConfig } from "../../../src/features/audit/AuditConfig.ts"
import * as Migrations from "../../../src/platform/db/Migrations.ts"
import { systemOwner } from "../../../src/kernel/Owner.ts"
import * as JobEngine from "../../../src/features/jobs/JobEngine.ts"
import { JobFailed, jobKind, type JobKind } from "../../../src/features/jobs/JobKind.ts"
import { JobKinds } from "../../../src/features/jobs/JobKinds.ts"
import { Jobs } from "../../../src/features/jobs/Jobs.ts"
import { RETRY_DELAYS_MS } from "../../../src/features/jobs/JobQueue.ts"
import { RecordingsRepo } from "../../../src/features/recordings/RecordingsRepo.ts"
import { RuntimePools } from "../../../src/runtime/RuntimePools.ts"
import { SessionsRepo } from "../../../src/features/sessions/SessionsRepo.ts"
import { WebhookOutbox } from "../../../src/features/webhooks/Outbox.ts"
import { settle, until } from "../../support/Poll.ts"
import * as TestService from "../../support/TestService.ts"

// The engine's claims, leases, retries and hand-overs, on a real Postgres, with
// kinds of job that are pure logic (the real kinds are tested end to end in Jobs.test.ts).

/** What the fake kinds do, decided by the test: each attempt takes the next of `plan` (then succeeds). */
interface Script {
  readonly plan: Array<"fail" | "fatal" | "defer" | "hang" | "ok">
  readonly started: Array<string>
  /** Completed by an attempt's scope closing (its "session" ended). */
  readonly released: Deferred.Deferred<void>
}

const scripted = (script: Script): JobKind =>
  jobKind({
    kind: "scripted",
    description: "Does what the test planned.",
    input: Schema.Struct({ n: Schema.optionalKey(Schema.Number) }),
    requires: [],
    runtime: null,
    timeoutSeconds: () => 30,
    run: (_input, run) =>
      Effect.gen(function* () {
        // The step is taken before the session is recorded: a test that saw the session knows the step is this attempt's.
        const step = script.plan.shift() ?? "ok"
        script.started.push(`${run.id}#${run.attempt}@${run.nodeId}`)
        yield* Effect.addFinalizer(() => Deferred.succeed(script.released, undefined))
        yield* run.usesSession(`sess_${run.attempt}`)
        if (step === "fail")
          return yield* new JobFailed({ code: "flaky", detail: "try again", retryable: true })
        if (step === "fatal")
          return yield* new JobFailed({ code: "broken", detail: "never", retryable: false })
        if (step === "defer")
          return yield* new JobFailed({
            code: "capacity_exhausted",
            detail: "full",
            retryable: true,
            deferred: true
          })
        if (step === "hang") return yield* Effect.never
        return { result: { attempt: run.attempt } }
      })
  })

const baseLayer = (url: string, dataDir: string, nodeId: string, perAccount = 4) =>
  Layer.mergeAll(
    Audit.layer,
    BlobStore.layer,
    WebhookOutbox.layer,
    SessionsRepo.layer,
    RecordingsRepo.layer,
    AccountBounds.layer
  ).pipe(
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 })),
    Layer.provideMerge(
      Layer.mergeAll(LimitsConfig.layer, JobsConfig.layer, AuditConfig.layer).pipe(
        Layer.provideMerge(
          ServiceConfig.layer({ dataDir, nodeId, logLevel: "Error", limits: { concurrentJobs: perAccount } })
        )
      )
    )
  )

/** A node: its engine, on its own connections to the shared database. */
const nodeLayer = (url: string, dataDir: string, nodeId: string, script: Script, perAccount: number) =>
  JobEngine.layer.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        Layer.succeed(JobKinds, JobKinds.make([scripted(script)])),
        Layer.succeed(RuntimePools, RuntimePools.fromPools([])),
        NodeDrain.layer.pipe(Layer.provide(DrainWaits.layer([]))),
        Nodes.layer
      )
    ),
    Layer.provideMerge(baseLayer(url, dataDir, nodeId, perAccount))
  )

const setup = Effect.gen(function* () {
  const url = yield* TestService.freshDatabase
  const dataDir = yield* TestService.freshDataDir
  yield* Effect.provide(
    Effect.void,
    Migrations.layer().pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url) })))
  )
  const script: Script = { plan: [], started: [], released: yield* Deferred.make<void>() }
  const accountId = Crypto.randomUUID()
  /** A node's engine, running until its scope closes (its node stopping). */
  const startNode = (nodeId: string, perAccount = 4) =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
      yield* Layer.buildWithScope(nodeLayer(url, dataDir, nodeId, script, perAccount), scope)
      return scope
    })
  // The API's side (no engine): creates, reads, cancels.
  const api = yield* Layer.build(
    Jobs.layer.pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          Layer.succeed(JobKinds, JobKinds.make([scripted(script)])),
          Layer.effect(Placement, Placement.make({ nodeId: "api", capacity: () => 0, several: false })).pipe(
            Layer.provide(placedSessions)
          ),
          // These jobs run on no workspace.
          Layer.succeed(
            WorkspaceNodes,
            WorkspaceNodes.of({
              diskNode: () => Effect.succeed(null),
              locate: () => Effect.succeed(Option.none())
            })
          )
        )
      ),
      Layer.provideMerge(baseLayer(url, dataDir, "api"))
    )
  )
  const sql = Context.get(api, SqlClient.SqlClient)
  const jobs = Context.get(api, Jobs)
  yield* sql`INSERT INTO accounts (id, name, kind, created_at) VALUES (${accountId}, 'a', 'personal', now())`
  const owner = systemOwner(accountId)
  const submit = Effect.map(jobs.create(owner, { kind: "scripted", input: {} }), (job) => job.id)
  const job = (id: string) => jobs.get(owner, id)
  return { sql, jobs, script, owner, submit, job, startNode }
})

describe("job engine", () => {
  it.effect(
    "retries a failure that may pass after 10 s, then 1 min, and fails it for good after 3 attempts",
    () =>
      Effect.gen(function* () {
        const { script, submit, job, startNode } = yield* setup
        yield* startNode("a")
        script.plan.push("fail", "fail", "fail")
        const id = yield* submit
        const first = yield* until(job(id), (j) => j.attempt_log[0]?.outcome === "failed")
        assert.strictEqual(first.state, "queued", "a retryable failure with attempts left waits")
        assert.deepStrictEqual(first.error, { code: "flaky", message: "try again" })
        const wait = first.next_attempt_at!.getTime() - first.attempt_log[0]!.finished_at!.getTime()
        assert.isAtLeast(wait, RETRY_DELAYS_MS[0] * 0.9)
        assert.isAtMost(wait, RETRY_DELAYS_MS[0] * 1.1)

        yield* settle(1_500)
        assert.lengthOf((yield* job(id)).attempt_log, 1, "nothing runs before its time")
        yield* TestClock.adjust(RETRY_DELAYS_MS[0] * 1.1)
        const second = yield* until(job(id), (j) => j.attempt_log[1]?.outcome === "failed")
        assert.strictEqual(second.state, "queued")
        yield* TestClock.adjust(RETRY_DELAYS_MS[1] * 1.1)
        const last = yield* until(job(id), (j) => j.state === "failed")
        assert.strictEqual(last.attempts, 3)
        assert.deepStrictEqual(
          last.attempt_log.map((a) => a.outcome),
          ["failed", "failed", "failed"]
        )
        assert.isNotNull(last.finished_at)
        assert.isNull(last.next_attempt_at)
      }).pipe(Effect.scoped),
    30_000
  )

  it.effect(
    "fails at once what would fail again, and does not count a deferral (no room) as an attempt",
    () =>
      Effect.gen(function* () {
        const { script, submit, job, startNode } = yield* setup
        yield* startNode("a")
        script.plan.push("fatal")
        const fatal = yield* submit
        const failed = yield* until(job(fatal), (j) => j.state === "failed")
        assert.strictEqual(failed.attempts, 1)
        assert.deepStrictEqual(failed.error, { code: "broken", message: "never" })

        script.plan.push("defer", "defer")
        const id = yield* submit
        const deferred = yield* until(job(id), (j) => j.attempt_log.length === 1 && j.state === "queued")
        assert.strictEqual(deferred.attempt_limit, 4, "the deferred attempt is given back")
        yield* TestClock.adjust("6 seconds")
        yield* until(job(id), (j) => j.attempt_log[1]?.outcome === "deferred" && j.state === "queued")
        yield* TestClock.adjust("6 seconds")
        const done = yield* until(job(id), (j) => j.state === "succeeded")
        assert.deepStrictEqual(
          done.attempt_log.map((a) => a.outcome),
          ["deferred", "deferred", "succeeded"]
        )
        assert.deepStrictEqual(done.result, { attempt: 3 })
        assert.strictEqual(done.attempt_limit, 5)
        assert.isNull(done.error)
      }).pipe(Effect.scoped)
  )

  it.effect(
    "a cancel reaches the node running the job: the attempt is interrupted and its scope closed",
    () =>
      Effect.gen(function* () {
        const { script, submit, job, jobs, owner, startNode } = yield* setup
        yield* startNode("a")
        script.plan.push("hang")
        const id = yield* submit
        yield* until(job(id), (j) => j.state === "running" && j.session_id === "sess_1")
        const cancelled = yield* jobs.cancel(owner, id)
        assert.strictEqual(cancelled.state, "cancelled")
        yield* Deferred.await(script.released).pipe(Effect.timeout("5 seconds"))
        yield* settle(200)
        const after = yield* job(id)
        assert.strictEqual(after.state, "cancelled", "the interrupted attempt wrote nothing over it")
        assert.deepStrictEqual(
          after.attempt_log.map((a) => a.outcome),
          ["cancelled"]
        )
      }).pipe(Effect.scoped)
  )

  it.effect(
    "a node that stops hands its running job over at once; one that died leaves it to the lease (abandoned)",
    () =>
      Effect.gen(function* () {
        const { script, submit, job, startNode, sql, owner, jobs } = yield* setup
        const scope = yield* startNode("a")
        script.plan.push("hang")
        const id = yield* submit
        yield* until(job(id), (j) => j.state === "running" && j.session_id === "sess_1")
        // Node a stops (SIGTERM, its drain over): the attempt is interrupted, the job due at once.
        yield* Scope.close(scope, Exit.void)
        const released = yield* job(id)
        assert.strictEqual(released.state, "queued")
        assert.deepStrictEqual(
          released.attempt_log.map((a) => a.outcome),
          ["interrupted"]
        )
        assert.strictEqual(released.attempt_limit, 4, "an interrupted attempt does not count")
        const b = yield* startNode("b")
        const done = yield* until(job(id), (j) => j.state === "succeeded")
        assert.deepStrictEqual(
          done.attempt_log.map((a) => [a.node_id, a.outcome]),
          [
            ["a", "interrupted"],
            ["b", "succeeded"]
          ]
        )

        // A node that died mid-attempt: its row says running with a lease that runs out. Made in one
        // transaction, so node b never sees it queued (it would claim it first).
        script.plan.push("ok")
        const orphan = yield* sql.withTransaction(
          Effect.gen(function* () {
            const id = (yield* jobs.create(owner, { kind: "scripted", input: { n: 1 } })).id
            yield* sql`UPDATE jobs SET state = 'running', attempts = 1, locked_by = 'dead/0', next_attempt_at = NULL,
              locked_until = ${new Date((yield* Clock.currentTimeMillis) + 60_000)} WHERE id = ${id}`
            yield* sql`INSERT INTO job_attempts (job_id, number, node_id, started_at) VALUES (${id}, 1, 'dead', now())`
            return id
          })
        )
        yield* settle(1_500)
        assert.strictEqual((yield* job(orphan)).state, "running", "not before its lease runs out")
        yield* TestClock.adjust("61 seconds")
        const taken = yield* until(job(orphan), (j) => j.state === "succeeded")
        assert.deepStrictEqual(
          taken.attempt_log.map((a) => [a.node_id, a.outcome]),
          [
            ["dead", "abandoned"],
            ["b", "succeeded"]
          ]
        )
        yield* Scope.close(b, Exit.void)
      }).pipe(Effect.scoped),
    30_000
  )

  it.effect("a read shows a job and its attempts as one commit left them, however writes interleave", () =>
    Effect.gen(function* () {
      const { submit, job, sql } = yield* setup
      const id = yield* submit
      yield* sql`INSERT INTO job_attempts (job_id, number, node_id, started_at) VALUES (${id}, 1, 'a', now())`
      // What an attempt's claim and its failure write, each in one transaction, over and over.
      const flip = (running: boolean) =>
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`UPDATE jobs SET state = ${running ? "running" : "queued"} WHERE id = ${id}`
            yield* sql`
              UPDATE job_attempts SET outcome = ${running ? null : "failed"},
                finished_at = ${running ? null : sql`now()`}
              WHERE job_id = ${id}`
          })
        )
      yield* flip(false)
      const writer = yield* Effect.forkScoped(Effect.forever(Effect.andThen(flip(true), flip(false))))
      let reads = 0
      while (reads < 400) {
        const read = yield* job(id)
        reads += 1
        assert.strictEqual(
          read.state === "running",
          read.attempt_log[0]!.outcome === null,
          `read ${reads}: state ${read.state} beside attempt ${read.attempt_log[0]!.outcome}`
        )
      }
      yield* Fiber.interrupt(writer)
    }).pipe(Effect.scoped)
  )

  it.effect("runs at most LIMIT_CONCURRENT_JOBS of an account at once, across nodes", () =>
    Effect.gen(function* () {
      const { script, submit, job, startNode, sql } = yield* setup
      const a = yield* startNode("a", 2)
      const b = yield* startNode("b", 2)
      script.plan.push("hang", "hang", "hang", "hang")
      const ids = yield* Effect.forEach([1, 2, 3, 4], () => submit)
      const running = () =>
        Effect.map(
          sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs WHERE state = 'running'`,
          (rows) => rows[0]!.n
        )
      yield* until(running(), (n) => n === 2)
      yield* settle(1_500)
      assert.strictEqual(yield* running(), 2, "two nodes, each with room, run two of the account's four")
      // Which two is not set: jobs due at the same time are taken in id order, and ids are random.
      const states = yield* Effect.forEach(ids, (id) => Effect.map(job(id), (j) => j.state))
      assert.deepStrictEqual(states.toSorted(), ["queued", "queued", "running", "running"])
      yield* Scope.close(a, Exit.void)
      yield* Scope.close(b, Exit.void)
    }).pipe(Effect.scoped)
  )
})
