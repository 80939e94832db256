// What the service asked of its Postgres: the cumulative counters of
// `pg_stat_database`, `pg_stat_wal` and `pg_stat_user_tables`, read over one
// connection of the bench's own, kept open (idle) between reads.
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as Path from "node:path"

export interface PgCounters {
  readonly transactions: number
  readonly rowsInserted: number
  readonly rowsUpdated: number
  readonly rowsDeleted: number
  readonly rowsFetched: number
  readonly walRecords: number
  readonly walBytes: number
  /** Rows inserted + updated + deleted, by table. */
  readonly writesByTable: Readonly<Record<string, number>>
}

export interface PgStats {
  readonly read: () => Promise<PgCounters>
  readonly close: () => Promise<void>
}

/** A database of the service's embedded Postgres in `dataDir` (`src/platform/db/EmbeddedPostgres.ts`: its socket in `postgres/run`). */
export const embeddedUrl = (dataDir: string, database: string) =>
  `postgresql://postgres@localhost:5432/${database}?host=${encodeURIComponent(Path.join(dataDir, "postgres", "run"))}`

/** The service's embedded Postgres in `dataDir`. */
export const connect = async (dataDir: string): Promise<PgStats> => {
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(
    Layer.buildWithScope(
      PgClient.layer({
        url: Redacted.make(embeddedUrl(dataDir, "postgres")),
        maxConnections: 1
      }),
      scope
    )
  )
  const sql = Context.get(context, SqlClient.SqlClient)
  const read = () =>
    Effect.runPromise(
      Effect.gen(function* () {
        const [database] = yield* sql<Record<string, string>>`
          SELECT xact_commit + xact_rollback AS transactions, tup_inserted, tup_updated, tup_deleted, tup_fetched
          FROM pg_stat_database WHERE datname = current_database()`
        const [wal] = yield* sql<Record<string, string>>`SELECT wal_records, wal_bytes FROM pg_stat_wal`
        const tables = yield* sql<{ relname: string; writes: string }>`
          SELECT relname, n_tup_ins + n_tup_upd + n_tup_del AS writes FROM pg_stat_user_tables`
        return {
          transactions: Number(database!.transactions),
          rowsInserted: Number(database!.tup_inserted),
          rowsUpdated: Number(database!.tup_updated),
          rowsDeleted: Number(database!.tup_deleted),
          rowsFetched: Number(database!.tup_fetched),
          walRecords: Number(wal!.wal_records),
          walBytes: Number(wal!.wal_bytes),
          writesByTable: Object.fromEntries(tables.map((row) => [row.relname, Number(row.writes)]))
        } satisfies PgCounters
      })
    )
  return { read, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

/** `after - before`, per unit of `per` (lifecycles). */
export const perUnit = (before: PgCounters, after: PgCounters, per: number) => {
  const tables = Object.entries(after.writesByTable)
    .map(([table, writes]) => [table, (writes - (before.writesByTable[table] ?? 0)) / per] as const)
    .filter(([, writes]) => writes > 0)
    .sort((a, b) => b[1] - a[1])
  return {
    transactions: (after.transactions - before.transactions) / per,
    rowsInserted: (after.rowsInserted - before.rowsInserted) / per,
    rowsUpdated: (after.rowsUpdated - before.rowsUpdated) / per,
    rowsDeleted: (after.rowsDeleted - before.rowsDeleted) / per,
    rowsFetched: (after.rowsFetched - before.rowsFetched) / per,
    walRecords: (after.walRecords - before.walRecords) / per,
    walBytes: (after.walBytes - before.walBytes) / per,
    writesByTable: Object.fromEntries(tables)
  }
}
