import { Effect } from "effect"
import { Sharding } from "effect/cluster"
import { HttpApiBuilder } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { Api } from "../Api.ts"
import { BrowserPool } from "../browser/BrowserPool.ts"
import { heldShards } from "../cluster/Placement.ts"
import { ServiceConfig } from "../Config.ts"
import { ServiceUnavailable } from "../domain/Errors.ts"

export const SystemHttp = HttpApiBuilder.group(
  Api,
  "system",
  Effect.fn(function* (handlers) {
    const sql = yield* SqlClient.SqlClient
    const pool = yield* BrowserPool
    const sharding = yield* Sharding.Sharding
    const config = yield* ServiceConfig
    return handlers
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        Effect.gen(function* () {
          const database = yield* sql`SELECT 1`.pipe(Effect.timeout("2 seconds"), Effect.isSuccess)
          const poolReady = yield* pool.ready.pipe(Effect.timeoutOption("10 millis"))
          if (!database || poolReady._tag === "None" || !poolReady.value)
            return yield* new ServiceUnavailable()
          return {
            status: "ready" as const,
            database: "ok" as const,
            browser_pool: { idle: yield* pool.idle, target: yield* pool.target, capacity: pool.capacity },
            node: { id: config.nodeId, shards: heldShards(sharding).length }
          }
        })
      )
  })
)
