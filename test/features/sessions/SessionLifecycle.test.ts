import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../../../src/features/audit/Audit.ts"
import { AuditConfig } from "../../../src/features/audit/AuditConfig.ts"
import {
  SessionHooks,
  type SessionHooksShape,
  SessionLifecycle
} from "../../../src/features/sessions/SessionLifecycle.ts"
import { SessionsRepo } from "../../../src/features/sessions/SessionsRepo.ts"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import * as Migrations from "../../../src/platform/db/Migrations.ts"
import * as TestService from "../../support/TestService.ts"

// The one door of a session's transitions, on a real Postgres: what features (and a host of the
// library) add to a change, and that it happens with the change or not at all.

/** SessionLifecycle over a fresh database, with `hooks` added to none. */
const lifecycleWith = <E, R>(hooks: Effect.Effect<Partial<SessionHooksShape>, E, R>) =>
  Effect.gen(function* () {
    const url = yield* TestService.freshDatabase
    const Database = Migrations.layer().pipe(
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 }))
    )
    return SessionLifecycle.layer.pipe(
      Layer.provideMerge(SessionHooks.add(hooks).pipe(Layer.provide(SessionHooks.layerNone))),
      Layer.provideMerge(Layer.mergeAll(SessionsRepo.layer, Audit.layer)),
      Layer.provideMerge(AuditConfig.layer),
      Layer.provideMerge(Database),
      Layer.provideMerge(ServiceConfig.layer({ logLevel: "Error", dataDir: yield* TestService.freshDataDir }))
    )
  })

/** An open session row of a new account. */
const openSession = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const accountId = Crypto.randomUUID()
  const id = `sess_${Crypto.randomUUID()}`
  yield* sql`INSERT INTO accounts (id, name, kind, created_at) VALUES (${accountId}, 'a', 'personal', now())`
  yield* sql`
    INSERT INTO sessions (id, account_id, status, profile, device, ttl_seconds, node_id, created_at, expires_at)
    VALUES (${id}, ${accountId}, 'ready', 'default', '', 60, 'local', now(), now() + interval '1 minute')`
  const status = Effect.map(
    sql<{ status: string }>`SELECT status FROM sessions WHERE id = ${id}`,
    (rows) => rows[0]!.status
  )
  return { id, status }
})

const ended = { status: "closed" as const, reason: "client_delete" as const, at: new Date() }

describe("SessionLifecycle", () => {
  it.effect(
    "a part writes in the statement of the change, and its output is followed up once it is made",
    () =>
      Effect.gen(function* () {
        const outputs: Array<unknown> = []
        const layer = yield* lifecycleWith(
          Effect.map(SqlClient.SqlClient, (sql) => ({
            endedParts: [
              (changed: string, prefix: string) =>
                Effect.succeed({
                  // Read-only: it runs because the output reads it.
                  ctes: sql`${sql(`${prefix}_seen`)} AS (SELECT id, bytes_up FROM ${sql(changed)})`,
                  output: sql`SELECT id FROM ${sql(`${prefix}_seen`)}`,
                  after: (output: unknown) => Effect.sync(() => void outputs.push(output))
                })
            ]
          }))
        )
        yield* Effect.gen(function* () {
          const lifecycle = yield* SessionLifecycle
          const session = yield* openSession
          const first = yield* lifecycle.recordEnded(session.id, ended)
          assert.isTrue(Option.isSome(first))
          assert.strictEqual(yield* session.status, "closed")
          assert.deepStrictEqual(outputs, [session.id])
          // Ended already: no change, no part's follow-up.
          assert.isTrue(Option.isNone(yield* lifecycle.recordEnded(session.id, ended)))
          assert.deepStrictEqual(outputs, [session.id])
        }).pipe(Effect.provide(layer))
      })
  )

  it.effect("a part that fails fails the change with it: one statement, all of it or none", () =>
    Effect.gen(function* () {
      const layer = yield* lifecycleWith(
        Effect.map(SqlClient.SqlClient, (sql) => ({
          endedParts: [
            (changed: string, prefix: string) =>
              Effect.succeed({
                // An audit event of no known actor type: refused by its table's check.
                ctes: sql`${sql(`${prefix}_bad`)} AS (
                  INSERT INTO audit_events (id, account_id, occurred_at, actor_type, action, target_type, outcome)
                  SELECT gen_random_uuid(), account_id, now(), 'nobody', 'x', 'session', 'success' FROM ${sql(changed)})`
              })
          ]
        }))
      )
      yield* Effect.gen(function* () {
        const lifecycle = yield* SessionLifecycle
        const session = yield* openSession
        const exit = yield* Effect.exit(lifecycle.recordEnded(session.id, ended))
        assert.isTrue(exit._tag === "Failure")
        assert.strictEqual(yield* session.status, "ready")
      }).pipe(Effect.provide(layer))
    })
  )

  it.effect(
    "a host's hook runs in the transaction of the change: it sees the row, and its failure undoes the change",
    () =>
      Effect.gen(function* () {
        const seen: Array<string> = []
        const layer = yield* lifecycleWith(
          Effect.succeed({
            ended: [
              (row) =>
                row.ended_reason === "ttl_expired"
                  ? Effect.die(new Error("the host refuses"))
                  : Effect.sync(() => void seen.push(`${row.id} ${row.status}`))
            ]
          })
        )
        yield* Effect.gen(function* () {
          const lifecycle = yield* SessionLifecycle
          const kept = yield* openSession
          const refused = yield* Effect.exit(
            lifecycle.recordEnded(kept.id, { ...ended, reason: "ttl_expired" })
          )
          assert.isTrue(refused._tag === "Failure")
          assert.strictEqual(yield* kept.status, "ready", "rolled back with the hook")
          const closed = yield* openSession
          yield* lifecycle.recordEnded(closed.id, ended)
          assert.deepStrictEqual(seen, [`${closed.id} closed`])
          assert.strictEqual(yield* closed.status, "closed")
        }).pipe(Effect.provide(layer))
      })
  )
})
