import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Path from "node:path"
import { ServiceConfig } from "../Config.ts"
import * as EmbeddedPostgres from "./EmbeddedPostgres.ts"
import * as Migrations from "./Migrations.ts"

/**
 * The service's SqlClient: `DATABASE_URL` when set, otherwise a real Postgres
 * started from the data dir (and stopped with this layer). Migrations from
 * `sql/` are applied before the layer is ready.
 */
export const layerClient: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, never, ServiceConfig> =
  Layer.unwrap(
    Effect.gen(function* () {
      const config = yield* ServiceConfig
      const url = yield* Option.match(config.databaseUrl, {
        onSome: Effect.succeed,
        onNone: () =>
          EmbeddedPostgres.start({ dir: Path.join(config.dataDir, "postgres") }).pipe(
            Effect.map((server) => Redacted.make(server.url()))
          )
      })
      return PgClient.layer({ url, maxConnections: 20, idleTimeout: "60 seconds" })
    })
  ).pipe(Layer.orDie)

export const layer = Migrations.layer().pipe(Layer.provideMerge(layerClient))
