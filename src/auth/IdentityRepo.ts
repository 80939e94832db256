import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { AccountInfo, ApiKey, User } from "../domain/Identity.ts"

const UserRow = Schema.Struct({
  id: Schema.String,
  email: Schema.String,
  password_hash: Schema.String,
  created_at: Schema.Date
})

const AccountRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  kind: Schema.Literals(["personal", "organization"]),
  created_at: Schema.Date,
  role: Schema.String
})

const ApiKeyRow = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  created_by: Schema.String,
  name: Schema.String,
  prefix: Schema.String,
  created_at: Schema.Date,
  last_used_at: Schema.NullOr(Schema.Date),
  revoked_at: Schema.NullOr(Schema.Date)
})
type ApiKeyRow = typeof ApiKeyRow.Type

const decodeAll = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) =>
  Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(schema)))

const toApiKey = (row: ApiKeyRow): ApiKey => ({
  id: row.id,
  name: row.name,
  prefix: row.prefix,
  created_at: row.created_at,
  last_used_at: row.last_used_at,
  revoked_at: row.revoked_at
})

export interface ApiKeyRecord {
  readonly key: ApiKey
  readonly accountId: string
  readonly userId: string
}

/** SQL for users, accounts, dashboard sessions and API keys. Failures here are defects. */
export class IdentityRepo extends Context.Service<
  IdentityRepo,
  {
    /** Inserts the user, their personal account and the owner membership; `None` when the email is taken. */
    readonly insertUser: (input: {
      readonly id: string
      readonly accountId: string
      readonly email: string
      readonly passwordHash: string
      readonly now: Date
    }) => Effect.Effect<Option.Option<User>>
    readonly findUserByEmail: (
      email: string
    ) => Effect.Effect<Option.Option<User & { readonly passwordHash: string }>>
    readonly findUserBySessionToken: (tokenHash: Uint8Array, now: Date) => Effect.Effect<Option.Option<User>>
    readonly insertWebSession: (input: {
      readonly tokenHash: Uint8Array
      readonly userId: string
      readonly now: Date
      readonly expiresAt: Date
    }) => Effect.Effect<void>
    readonly deleteWebSession: (tokenHash: Uint8Array) => Effect.Effect<void>
    readonly listAccounts: (userId: string) => Effect.Effect<ReadonlyArray<AccountInfo>>
    readonly personalAccountId: (userId: string) => Effect.Effect<string>
    readonly accountExists: (accountId: string) => Effect.Effect<boolean>
    readonly insertApiKey: (input: {
      readonly id: string
      readonly accountId: string
      readonly userId: string
      readonly name: string
      readonly prefix: string
      readonly secretHash: Uint8Array
      readonly now: Date
    }) => Effect.Effect<ApiKey>
    readonly listApiKeys: (accountId: string) => Effect.Effect<ReadonlyArray<ApiKey>>
    /** The active key with this hash; marks it used (at most once a minute per key). */
    readonly useApiKey: (secretHash: Uint8Array, now: Date) => Effect.Effect<Option.Option<ApiKeyRecord>>
  }
>()("rbs/auth/IdentityRepo") {
  static readonly layer = Layer.effect(
    IdentityRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      const insertUser = (input: Parameters<IdentityRepo["Service"]["insertUser"]>[0]) =>
        sql
          .withTransaction(
            Effect.gen(function* () {
              const inserted = yield* sql`
                INSERT INTO users (id, email, password_hash, created_at)
                VALUES (${input.id}, ${input.email}, ${input.passwordHash}, ${input.now})
                ON CONFLICT DO NOTHING
                RETURNING id, email, password_hash, created_at`.pipe(decodeAll(UserRow))
              const user = inserted[0]
              if (user === undefined) return Option.none()
              yield* sql`
                INSERT INTO accounts (id, name, kind, created_at)
                VALUES (${input.accountId}, ${input.email}, 'personal', ${input.now})`
              yield* sql`
                INSERT INTO account_members (account_id, user_id, role, joined_at)
                VALUES (${input.accountId}, ${input.id}, 'owner', ${input.now})`
              return Option.some({ id: user.id, email: user.email, created_at: user.created_at })
            })
          )
          .pipe(Effect.orDie)

      const findUserByEmail = (email: string) =>
        sql`SELECT id, email, password_hash, created_at FROM users WHERE lower(email) = lower(${email})`.pipe(
          decodeAll(UserRow),
          Effect.map((rows) =>
            Option.map(Option.fromNullishOr(rows[0]), (row) => ({
              id: row.id,
              email: row.email,
              created_at: row.created_at,
              passwordHash: row.password_hash
            }))
          ),
          Effect.orDie
        )

      const findUserBySessionToken = (tokenHash: Uint8Array, now: Date) =>
        sql`
          SELECT u.id, u.email, u.password_hash, u.created_at
          FROM web_sessions s JOIN users u ON u.id = s.user_id
          WHERE s.token_hash = ${tokenHash} AND s.expires_at > ${now}`.pipe(
          decodeAll(UserRow),
          Effect.map((rows) =>
            Option.map(Option.fromNullishOr(rows[0]), (row) => ({
              id: row.id,
              email: row.email,
              created_at: row.created_at
            }))
          ),
          Effect.orDie
        )

      const insertWebSession = (input: Parameters<IdentityRepo["Service"]["insertWebSession"]>[0]) =>
        sql`
          INSERT INTO web_sessions (token_hash, user_id, created_at, expires_at)
          VALUES (${input.tokenHash}, ${input.userId}, ${input.now}, ${input.expiresAt})`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const deleteWebSession = (tokenHash: Uint8Array) =>
        sql`DELETE FROM web_sessions WHERE token_hash = ${tokenHash}`.pipe(Effect.asVoid, Effect.orDie)

      const listAccounts = (userId: string) =>
        sql`
          SELECT a.id, a.name, a.kind, a.created_at, m.role
          FROM account_members m JOIN accounts a ON a.id = m.account_id
          WHERE m.user_id = ${userId}
          ORDER BY a.kind = 'personal' DESC, a.created_at`.pipe(
          decodeAll(AccountRow),
          Effect.map((rows) => rows.map((row) => ({ ...row, personal: row.kind === "personal" }))),
          Effect.orDie
        )

      const personalAccountId = (userId: string) =>
        sql<{ readonly id: string }>`
          SELECT a.id FROM account_members m JOIN accounts a ON a.id = m.account_id
          WHERE m.user_id = ${userId} AND a.kind = 'personal'`.pipe(
          Effect.flatMap((rows) =>
            rows[0] === undefined
              ? Effect.die(new Error(`user ${userId} has no personal account`))
              : Effect.succeed(rows[0].id)
          ),
          Effect.orDie
        )

      const accountExists = (accountId: string) =>
        sql`SELECT id FROM accounts WHERE id = ${accountId}`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        )

      const insertApiKey = (input: Parameters<IdentityRepo["Service"]["insertApiKey"]>[0]) =>
        sql`
          INSERT INTO api_keys (id, account_id, created_by, name, prefix, secret_hash, created_at)
          VALUES (${input.id}, ${input.accountId}, ${input.userId}, ${input.name}, ${input.prefix}, ${input.secretHash}, ${input.now})
          RETURNING *`.pipe(
          decodeAll(ApiKeyRow),
          Effect.map((rows) => toApiKey(rows[0]!)),
          Effect.orDie
        )

      const listApiKeys = (accountId: string) =>
        sql`SELECT * FROM api_keys WHERE account_id = ${accountId} ORDER BY created_at DESC, id DESC`.pipe(
          decodeAll(ApiKeyRow),
          Effect.map((rows) => rows.map(toApiKey)),
          Effect.orDie
        )

      const useApiKey = (secretHash: Uint8Array, now: Date) =>
        Effect.gen(function* () {
          const rows = yield* sql`
            SELECT * FROM api_keys WHERE secret_hash = ${secretHash} AND revoked_at IS NULL`.pipe(
            decodeAll(ApiKeyRow)
          )
          const row = rows[0]
          if (row === undefined) return Option.none<ApiKeyRecord>()
          if (row.last_used_at === null || now.getTime() - row.last_used_at.getTime() > 60_000) {
            yield* sql`UPDATE api_keys SET last_used_at = ${now} WHERE id = ${row.id}`
          }
          return Option.some<ApiKeyRecord>({
            key: toApiKey(row),
            accountId: row.account_id,
            userId: row.created_by
          })
        }).pipe(Effect.orDie)

      return IdentityRepo.of({
        insertUser,
        findUserByEmail,
        findUserBySessionToken,
        insertWebSession,
        deleteWebSession,
        listAccounts,
        personalAccountId,
        accountExists,
        insertApiKey,
        listApiKeys,
        useApiKey
      })
    })
  )
}
