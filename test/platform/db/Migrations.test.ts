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

  it.live(
    "two nodes starting at once on an empty database: one applies sql/, the other waits and applies nothing",
    () =>
      Effect.gen(function* () {
        const url = yield* TestService.freshDatabase
        const node = Migrations.run().pipe(
          Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })),
          Effect.result
        )
        const results = yield* Effect.all(
          Array.from({ length: 4 }, () => node),
          { concurrency: "unbounded" }
        )
        const applied = results.map((result) => {
          assert.strictEqual(result._tag, "Success", String(result._tag === "Failure" && result.failure))
          return result._tag === "Success" ? result.success.length : -1
        })
        const files = (yield* Effect.promise(() => Fs.readdir(Migrations.defaultSqlDir))).filter((file) =>
          /^\d+_.+\.sql$/.test(file)
        )
        assert.sameMembers(applied, [files.length, 0, 0, 0], "all of sql/, once")
      })
  )

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

          // 0020 first, then those that came after it.
          const applied = yield* Migrations.run()
          assert.strictEqual(applied[0]?.[0], 20)
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

  it.live(
    "after 0020 a write of the money on either side reaches the other once, and the copy of a copy writes nothing",
    () =>
      Effect.gen(function* () {
        const url = yield* TestService.freshDatabase
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          yield* Migrations.run()
          const money = (id: string) =>
            Effect.map(
              sql<{ table: string; balance: string; carry: string; threshold: string }>`
                SELECT 'accounts' AS table, balance_micro_usd::text AS balance, egress_carry_bytes::text AS carry,
                  balance_low_threshold_micro_usd::text AS threshold
                FROM accounts WHERE id = ${id}
                UNION ALL
                SELECT 'account_balances', balance_micro_usd::text, egress_carry_bytes::text,
                  balance_low_threshold_micro_usd::text
                FROM account_balances WHERE account_id = ${id}
                ORDER BY 1`,
              (rows) => rows.map((row) => ({ ...row }))
            )
          const both = (balance: string, carry: string, threshold: string) => [
            { table: "account_balances", balance, carry, threshold },
            { table: "accounts", balance, carry, threshold }
          ]
          // Rows written (inserted or updated) in this transaction so far, per table.
          const written = Effect.map(
            sql<{ relname: string; n: string }>`
              SELECT relname, (n_tup_ins + n_tup_upd)::text AS n FROM pg_stat_xact_user_tables
              WHERE relname IN ('accounts', 'account_balances') ORDER BY relname`,
            (rows) => Object.fromEntries(rows.map((row) => [row.relname, Number(row.n)]))
          )
          const writesOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
            sql.withTransaction(
              Effect.gen(function* () {
                const before = yield* written
                yield* effect
                const after = yield* written
                return {
                  accounts: (after.accounts ?? 0) - (before.accounts ?? 0),
                  account_balances: (after.account_balances ?? 0) - (before.account_balances ?? 0)
                }
              })
            )

          // An account made as the previous version made one (identity's insert names no money).
          const id = "00000000-0000-4000-8000-000000000003"
          assert.deepStrictEqual(
            yield* writesOf(sql`
              INSERT INTO accounts (id, name, kind, created_at) VALUES (${id}, 'old node', 'organization', now())`),
            { accounts: 1, account_balances: 1 }
          )
          assert.deepStrictEqual(yield* money(id), both("0", "0", "1000000"))

          // The previous version's writes (its BillingRepo's statements) reach billing's table.
          assert.deepStrictEqual(
            yield* writesOf(sql`
              UPDATE accounts SET balance_micro_usd = ${4_000_000n}, egress_carry_bytes = ${150n} WHERE id = ${id}`),
            { accounts: 1, account_balances: 1 }
          )
          assert.deepStrictEqual(yield* money(id), both("4000000", "150", "1000000"))
          yield* sql`UPDATE accounts SET balance_low_threshold_micro_usd = ${250_000n} WHERE id = ${id}`
          assert.deepStrictEqual(yield* money(id), both("4000000", "150", "250000"))

          // This version's writes reach the old columns.
          assert.deepStrictEqual(
            yield* writesOf(sql`
              UPDATE account_balances SET balance_micro_usd = ${3_999_000n}, egress_carry_bytes = ${10n}
              WHERE account_id = ${id}`),
            { accounts: 1, account_balances: 1 }
          )
          assert.deepStrictEqual(yield* money(id), both("3999000", "10", "250000"))
          yield* sql`
            INSERT INTO account_balances (account_id, balance_low_threshold_micro_usd) VALUES (${id}, ${2_000_000n})
            ON CONFLICT (account_id) DO UPDATE SET balance_low_threshold_micro_usd = excluded.balance_low_threshold_micro_usd`
          assert.deepStrictEqual(yield* money(id), both("3999000", "10", "2000000"))

          // Figures written unchanged are no change: nothing is copied.
          assert.deepStrictEqual(
            yield* writesOf(sql`UPDATE accounts SET balance_micro_usd = balance_micro_usd WHERE id = ${id}`),
            { accounts: 1, account_balances: 0 }
          )
          assert.deepStrictEqual(
            yield* writesOf(sql`
              UPDATE account_balances SET egress_carry_bytes = egress_carry_bytes WHERE account_id = ${id}`),
            { accounts: 0, account_balances: 1 }
          )
          // A write of other columns of the account copies nothing either.
          assert.deepStrictEqual(
            yield* writesOf(sql`UPDATE accounts SET name = 'old node, renamed' WHERE id = ${id}`),
            { accounts: 1, account_balances: 0 }
          )
          assert.deepStrictEqual(yield* money(id), both("3999000", "10", "2000000"))

          // The account's money goes with it.
          yield* sql`DELETE FROM accounts WHERE id = ${id}`
          assert.deepStrictEqual(yield* money(id), [])
        }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })), Effect.orDie)
      }).pipe(Effect.scoped)
  )
})
