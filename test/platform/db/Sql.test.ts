import { assert, describe, layer } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Cause, Effect, Exit, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient, SqlError } from "effect/sql"
import * as Sql from "../../../src/platform/db/Sql.ts"
import * as TestService from "../../support/TestService.ts"

const PgLive = Layer.unwrap(
  Effect.map(TestService.freshDatabase, (url) =>
    PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })
  )
)

class NameTaken extends Schema.TaggedError<NameTaken>()("NameTaken", {}) {}
class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {}) {}

const Thing = Schema.Struct({ name: Schema.String, n: Schema.Number })

/** A repository as a feature writes one: its statements carry no policy of their own. */
const makeRepo = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS things (name text PRIMARY KEY, n int NOT NULL)`
  return Sql.defects({
    insert: (name: string, n: number) =>
      sql`INSERT INTO things (name, n) VALUES (${name}, ${n})`.pipe(
        Effect.asVoid,
        // The domain cares about this one failure: it answers it, before the policy sees it.
        Effect.catchIf(
          (error) => error.reason._tag === "UniqueViolation",
          () => Effect.fail(new NameTaken())
        )
      ),
    find: (name: string) =>
      sql`SELECT name, n FROM things WHERE name = ${name}`.pipe(
        Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(Thing))),
        Effect.flatMap((rows) =>
          rows[0] === undefined ? Effect.fail(new NotFound()) : Effect.succeed(rows[0])
        )
      ),
    broken: () => sql`SELECT * FROM no_such_table`,
    // A row that is not what the schema reads: n is text.
    misread: () =>
      sql`SELECT 'x' AS name, 'not a number' AS n`.pipe(
        Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(Thing)))
      ),
    count: sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM things`.pipe(
      Effect.map((rows) => rows[0]?.n ?? 0)
    )
  })
})

/** The defect a failed effect died with, if it died. */
const defectOf = <A, E>(exit: Exit.Exit<A, E>) =>
  Exit.isFailure(exit)
    ? Option.fromNullishOr(exit.cause.reasons.find(Cause.isDieReason)?.defect)
    : Option.none()

layer(PgLive, { excludeTestServices: true })("the SQL failure policy", (it) => {
  describe("Sql.defects", () => {
    it.effect("passes a success through", () =>
      Effect.gen(function* () {
        const repo = yield* makeRepo
        yield* repo.insert("a", 1)
        assert.deepStrictEqual(yield* repo.find("a"), { name: "a", n: 1 })
        assert.isAtLeast(yield* repo.count, 1)
      })
    )

    it.effect("turns a failed statement into a defect carrying the SqlError", () =>
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const exit = yield* Effect.exit(repo.broken())
        const defect = defectOf(exit)
        assert.isTrue(Option.isSome(defect) && SqlError.isSqlError(defect.value), String(exit))
      })
    )

    it.effect("turns a row that does not decode into a defect", () =>
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const exit = yield* Effect.exit(repo.misread())
        const defect = defectOf(exit)
        assert.isTrue(Option.isSome(defect) && Schema.isSchemaError(defect.value), String(exit))
      })
    )

    it.effect("keeps the domain's errors typed, a SQL failure the domain answers included", () =>
      Effect.gen(function* () {
        const repo = yield* makeRepo
        yield* repo.insert("b", 1)
        const taken: NameTaken = yield* Effect.flip(repo.insert("b", 2))
        assert.strictEqual(taken._tag, "NameTaken")
        const missing: NotFound = yield* Effect.flip(repo.find("nobody"))
        assert.strictEqual(missing._tag, "NotFound")
      })
    )
  })

  describe("Sql.orDefect", () => {
    it.effect(
      "rolls a transaction back and dies when a statement fails, and keeps a domain error typed",
      () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const repo = yield* makeRepo
          const failing = Effect.exit(
            Sql.orDefect(
              sql.withTransaction(
                Effect.andThen(repo.insert("c", 1), sql`INSERT INTO things (name, n) VALUES ('d', NULL)`)
              )
            )
          )
          assert.isTrue(Option.isSome(defectOf(yield* failing)))
          assert.strictEqual((yield* Effect.flip(repo.find("c")))._tag, "NotFound")

          const refused = yield* Effect.flip(
            Sql.orDefect(
              sql.withTransaction(Effect.andThen(repo.insert("e", 1), Effect.fail(new NotFound())))
            )
          )
          assert.strictEqual(refused._tag, "NotFound")
          assert.strictEqual((yield* Effect.flip(repo.find("e")))._tag, "NotFound")
        })
    )
  })

  describe("Sql.sqlErrorOrDefect", () => {
    it.effect("dies on a failed statement and keeps the caller's SchemaError typed", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const failed = yield* Effect.exit(
          Sql.sqlErrorOrDefect(sql.withTransaction(sql`SELECT * FROM nowhere`))
        )
        const defect = defectOf(failed)
        assert.isTrue(Option.isSome(defect) && SqlError.isSqlError(defect.value), String(failed))
        // The caller's own decoding (a bad input, say) is its to answer: it stays a failure.
        const misread: Schema.SchemaError = yield* Effect.flip(
          Sql.sqlErrorOrDefect(
            sql.withTransaction(Schema.decodeUnknownEffect(Thing)({ name: "x", n: "not a number" }))
          )
        )
        assert.isTrue(Schema.isSchemaError(misread))
      })
    )
  })
})
