import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Migrations from "../../../src/platform/db/Migrations.ts"
import * as TestService from "../../support/TestService.ts"

describe("migrations", () => {
  it("splits a file into statements, dropping comment lines", () => {
    assert.deepStrictEqual(
      Migrations.splitStatements(
        "-- a comment\nCREATE TABLE a (x int);\n\n  -- another\nCREATE INDEX i ON a (x);\n"
      ),
      ["CREATE TABLE a (x int)", "CREATE INDEX i ON a (x)"]
    )
  })

  it("keeps a dollar-quoted function body in one statement", () => {
    const body =
      "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no'; END $$"
    assert.deepStrictEqual(
      Migrations.splitStatements(`${body};\nCREATE TRIGGER t BEFORE UPDATE ON a EXECUTE FUNCTION f();`),
      [body, "CREATE TRIGGER t BEFORE UPDATE ON a EXECUTE FUNCTION f()"]
    )
  })

  it.live("applies sql/ once, in order, and a second run applies nothing", () =>
    Effect.gen(function* () {
      const url = yield* TestService.freshDatabase
      yield* Effect.gen(function* () {
        const first = yield* Migrations.run()
        assert.deepStrictEqual(first.map(([id]) => id).slice(0, 1), [1])
        const second = yield* Migrations.run()
        assert.deepStrictEqual(second, [])
        const sql = yield* SqlClient.SqlClient
        const tables = yield* sql<{ table_name: string }>`
          SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`
        for (const table of ["accounts", "api_keys", "sessions", "users", "web_sessions"]) {
          assert.include(
            tables.map((t) => t.table_name),
            table
          )
        }
      }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })), Effect.orDie)
    }).pipe(Effect.scoped)
  )
})
