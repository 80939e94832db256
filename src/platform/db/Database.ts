import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Path from "node:path"
import { DatabaseConfig, NodeConfig } from "../config/Config.ts"
import * as EmbeddedPostgres from "./EmbeddedPostgres.ts"
import * as Migrations from "./Migrations.ts"

const makeClient = (
  shared: boolean
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, never, DatabaseConfig | NodeConfig> =>
  Layer.unwrap(
    Effect.gen(function* () {
      const config = { ...(yield* NodeConfig), ...(yield* DatabaseConfig) }
      const url = yield* Option.match(config.databaseUrl, {
        onSome: Effect.succeed,
        onNone: () =>
          EmbeddedPostgres.start({ dir: Path.join(config.dataDir, "postgres"), shared }).pipe(
            Effect.map((server) => Redacted.make(server.url()))
          )
      })
      return PgClient.layer({ url, maxConnections: 20, idleTimeout: "60 seconds" })
    })
  ).pipe(Layer.orDie)

/**
 * The service's SqlClient: `DATABASE_URL` when set, otherwise a real Postgres
 * started from the data dir (and stopped with this layer; the service waits
 * for another process of ours to be done with it first).
 */
export const layerClient = makeClient(false)

/**
 * The same for a short command beside a running service (`rbs billing
 * credit`): it shares the service's embedded Postgres rather than waiting.
 */
export const layerClientShared = makeClient(true)

/** `layerClient` with the migrations from `sql/` applied before it is ready. */
export const layer = Migrations.layer().pipe(Layer.provideMerge(layerClient))

/** `layerClientShared` with the migrations applied. */
export const layerShared = Migrations.layer().pipe(Layer.provideMerge(layerClientShared))
