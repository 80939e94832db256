import { Context, Effect, Layer } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"

/**
 * Whether a job still runs or waits to: what another feature holding a
 * resource for a job asks to tell a live hold from one left by a job that
 * ended (or whose node died mid-job and was failed since).
 */
export class ActiveJobs extends Context.Service<
  ActiveJobs,
  {
    /** True while the job is `queued` or `running`. */
    readonly isActive: (jobId: string) => Effect.Effect<boolean>
  }
>()("rbs/jobs/ActiveJobs") {
  static readonly layer = Layer.effect(
    ActiveJobs,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return ActiveJobs.of({
        isActive: (jobId) =>
          sql<{ readonly id: string }>`
            SELECT id FROM jobs WHERE id = ${jobId} AND state IN ('queued', 'running')`.pipe(
            Effect.map((rows) => rows.length > 0),
            Sql.orDefect
          )
      })
    })
  )
}
