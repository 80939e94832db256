import { Effect, Layer, Schedule } from "effect"
import { Migrator, SqlClient, SqlError } from "effect/sql"
import * as Fs from "node:fs/promises"
import { fileURLToPath } from "node:url"

/** `sql/` at the package root, from both `src/db/` and `dist/db/`. */
export const defaultSqlDir = fileURLToPath(new URL("../../../sql/", import.meta.url))

/**
 * Splits a migration file into statements: `@effect/sql-pg` speaks only the
 * extended protocol, which runs one statement per query. Statements end at a
 * `;` outside a dollar-quoted body (`$$ ... $$`, for functions); whole-line
 * `--` comments are dropped.
 */
export const splitStatements = (text: string): ReadonlyArray<string> => {
  const source = text
    .split("\n")
    .filter((line) => !line.trimStart().startsWith("--"))
    .join("\n")
  const statements: Array<string> = []
  let start = 0
  let quote: string | undefined
  for (let i = 0; i < source.length; i++) {
    if (source[i] === "$") {
      const tag = /^\$[A-Za-z_]*\$/.exec(source.slice(i))?.[0]
      if (tag !== undefined) {
        if (quote === undefined) quote = tag
        else if (quote === tag) quote = undefined
        i += tag.length - 1
        continue
      }
    }
    if (source[i] === ";" && quote === undefined) {
      statements.push(source.slice(start, i))
      start = i + 1
    }
  }
  statements.push(source.slice(start))
  return statements.map((statement) => statement.trim()).filter((statement) => statement.length > 0)
}

/** Loads `NNNN_name.sql` files as migrations, in id order. */
export const fromSqlDirectory = (dir: string): Migrator.Loader =>
  Effect.tryPromise({
    try: async () => {
      const files = (await Fs.readdir(dir)).filter((file) => /^\d+_.+\.sql$/.test(file)).sort()
      return Promise.all(
        files.map(async (file): Promise<Migrator.ResolvedMigration> => {
          const [, id, name] = /^(\d+)_(.+)\.sql$/.exec(file)!
          const statements = splitStatements(await Fs.readFile(`${dir}/${file}`, "utf8"))
          const run = Effect.gen(function* () {
            const sql = yield* SqlClient.SqlClient
            for (const statement of statements) yield* sql.unsafe(statement)
          })
          return [Number(id), name!, Effect.succeed(run)]
        })
      )
    },
    catch: (cause) =>
      new Migrator.MigrationError({ kind: "ImportError", message: `Cannot read ${dir}`, cause })
  })

export const run = (dir: string = defaultSqlDir) =>
  Migrator.make({})({ loader: fromSqlDirectory(dir), table: "rbs_migrations" }).pipe(
    Effect.tap((applied) =>
      applied.length > 0
        ? Effect.logInfo("db.migrated", { applied: applied.map(([id, name]) => `${id}_${name}`) })
        : Effect.void
    )
  )

/** How long a starting node waits for its database to accept connections (its first statement is a migration's). */
export const DATABASE_WAIT_SECONDS = 60

/** Whether an error is the database not answering (not up yet), which a wait may cure. */
const unreachable = (error: unknown): boolean =>
  error instanceof SqlError.SqlError
    ? error.reason._tag === "ConnectionError"
    : error instanceof Migrator.MigrationError && unreachable(error.cause)

/**
 * Applies pending migrations while the layer is built. A database that is not up yet (its
 * container starting beside this one, a failover under way) is waited for, a try a second, for
 * `DATABASE_WAIT_SECONDS` before the node gives up.
 */
export const layer = (dir?: string) =>
  Layer.effectDiscard(
    run(dir).pipe(
      Effect.tapError((error) =>
        unreachable(error)
          ? Effect.logWarning("db.waiting", { reason: error.message, upToSeconds: DATABASE_WAIT_SECONDS })
          : Effect.void
      ),
      Effect.retry({
        while: unreachable,
        schedule: Schedule.spaced("1 second"),
        times: DATABASE_WAIT_SECONDS
      }),
      Effect.orDie
    )
  )
