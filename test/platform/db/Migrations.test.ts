import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
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

  it.live(
    "0020 copies every account's balance, carry and threshold into billing's table, and keeps the old columns",
    () =>
      Effect.gen(function* () {
        const url = yield* TestService.freshDatabase
        // The schema as the previous version left it: every migration before 0020.
        const before = yield* Effect.acquireRelease(
          Effect.promise(async () => {
            const dir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-migrations-"))
            for (const file of await Fs.readdir(Migrations.defaultSqlDir))
              if (/^\d+_.+\.sql$/.test(file) && Number(file.slice(0, 4)) < 20)
                await Fs.copyFile(Path.join(Migrations.defaultSqlDir, file), Path.join(dir, file))
            return dir
          }),
          (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
        )
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const old = yield* Migrations.run(before)
          assert.strictEqual(old.at(-1)?.[0], 19)
          const rich = "00000000-0000-4000-8000-000000000001"
          const fresh = "00000000-0000-4000-8000-000000000002"
          yield* sql`
          INSERT INTO accounts (id, name, kind, created_at, balance_micro_usd, egress_carry_bytes,
            balance_low_threshold_micro_usd)
          VALUES (${rich}, 'rich', 'personal', now(), 12500001, 199, 250000),
            (${fresh}, 'fresh', 'personal', now(), DEFAULT, DEFAULT, DEFAULT)`

          const applied = yield* Migrations.run()
          assert.deepStrictEqual(
            applied.map(([id]) => id),
            [20]
          )
          const money = yield* sql<{ account_id: string; balance: string; carry: string; threshold: string }>`
          SELECT account_id, balance_micro_usd::text AS balance, egress_carry_bytes::text AS carry,
            balance_low_threshold_micro_usd::text AS threshold
          FROM account_balances ORDER BY account_id`
          assert.deepStrictEqual(
            money.map((row) => ({ ...row })),
            [
              { account_id: rich, balance: "12500001", carry: "199", threshold: "250000" },
              { account_id: fresh, balance: "0", carry: "0", threshold: "1000000" }
            ]
          )
          // A node of the previous version, still running during a rolling deploy, reads these.
          const [kept] = yield* sql<{ balance: string }>`
          SELECT balance_micro_usd::text AS balance FROM accounts WHERE id = ${rich}`
          assert.strictEqual(kept?.balance, "12500001")
        }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })), Effect.orDie)
      }).pipe(Effect.scoped)
  )
})
