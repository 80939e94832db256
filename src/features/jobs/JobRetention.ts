import { Clock, Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { BlobStore } from "../../platform/blobs/BlobStore.ts"
import { Nodes } from "../../platform/cluster/Nodes.ts"
import { BlobsConfig, NodeConfig } from "../../platform/config/Config.ts"
import * as Sql from "../../platform/db/Sql.ts"
import * as Housekeeping from "../../platform/work/Housekeeping.ts"
import { JobsConfig } from "./JobsConfig.ts"

/** Jobs deleted a statement at a time. */
const PURGE_BATCH = 500

const FINISHED = ["succeeded", "failed", "cancelled"]

/**
 * Finished jobs (succeeded, failed, cancelled) past `JOB_RETENTION_DAYS`
 * since they ended are deleted, with their attempts and their result's blob;
 * a queued or running job stays whatever its age. Every node purges hourly:
 * the jobs without a result file, and those whose result it can remove (in a
 * shared S3 store, or in its own directory); a job whose result sits on a node
 * silent for the whole retention goes without it (nobody could serve it).
 */
export class JobRetention extends Context.Service<
  JobRetention,
  {
    /** One round: how many jobs it deleted. */
    readonly purge: Effect.Effect<number>
  }
>()("rbs/jobs/JobRetention") {
  static readonly layer = Layer.effect(
    JobRetention,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const blobs = yield* BlobStore
      const nodes = yield* Nodes
      const { nodeId } = yield* NodeConfig
      const { jobRetentionDays } = yield* JobsConfig
      const shared = (yield* BlobsConfig).blobStore._tag === "S3"

      const batch = (cutoff: Date, gone: ReadonlyArray<string>) =>
        Effect.gen(function* () {
          const old = yield* sql<{
            readonly id: string
            readonly result_key: string | null
            readonly ours: boolean
          }>`
            SELECT id, result_key, (${shared} OR result_node_id = ${nodeId}) AS ours FROM jobs
            WHERE state IN ${sql.in(FINISHED)} AND finished_at < ${cutoff}
              AND (result_key IS NULL OR ${shared} OR result_node_id = ${nodeId}
                OR result_node_id = ANY (${gone}::text[]))
            ORDER BY finished_at LIMIT ${PURGE_BATCH}`
          if (old.length === 0) return 0
          // The blobs first: a round cut short leaves rows whose result answers 410 until the next
          // round, never a blob no row names.
          for (const row of old) if (row.result_key !== null && row.ours) yield* blobs.remove(row.result_key)
          yield* sql`
            DELETE FROM jobs
            WHERE id IN ${sql.in(old.map((row) => row.id))} AND state IN ${sql.in(FINISHED)}
              AND finished_at < ${cutoff}`
          return old.length
        })

      const purge = Effect.gen(function* () {
        const cutoff = new Date((yield* Clock.currentTimeMillis) - jobRetentionDays * 86_400_000)
        // Nodes that beat before the cutoff and never since: what they hold is nobody's to serve.
        const gone = (yield* nodes.silentSince(cutoff)).filter((id) => id !== nodeId)
        let total = 0
        while (true) {
          const removed = yield* batch(cutoff, gone)
          total += removed
          if (removed < PURGE_BATCH) return total
        }
      }).pipe(Sql.orDefect)

      return JobRetention.of({ purge })
    })
  )

  /** Runs `purge` hourly on this node. */
  static readonly layerRetention = Layer.effectDiscard(
    Effect.gen(function* () {
      const retention = yield* JobRetention
      yield* Housekeeping.every(
        { name: "jobs", interval: "1 hour", removed: (jobs) => ({ jobs }) },
        retention.purge
      ).pipe(Effect.forkScoped)
    })
  )
}
