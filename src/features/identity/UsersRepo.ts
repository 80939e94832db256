import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { User } from "../../kernel/Identity.ts"
import * as Sql from "../../platform/db/Sql.ts"

const UserRow = Schema.Struct({
  id: Schema.String,
  email: Schema.String,
  password_hash: Schema.NullOr(Schema.String),
  created_at: Schema.Date,
  tokens_valid_after: Schema.NullOr(Schema.Date)
})
type UserRow = typeof UserRow.Type

const decodeAll = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) =>
  Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(schema)))

export interface UserRecord {
  readonly user: User
  /** `null` for a user who only logs in through a provider. */
  readonly passwordHash: string | null
  /** Access tokens issued before this no longer count ("log out everywhere"). */
  readonly tokensValidAfter: Date | null
}

const toRecord = (row: UserRow): UserRecord => ({
  user: { id: row.id, email: row.email, created_at: row.created_at },
  passwordHash: row.password_hash,
  tokensValidAfter: row.tokens_valid_after
})

const first = (rows: ReadonlyArray<UserRow>) => Option.map(Option.fromNullishOr(rows[0]), toRecord)

/** SQL for users, their dashboard sessions and provider identities. Failures here are defects. */
export class UsersRepo extends Context.Service<
  UsersRepo,
  {
    /** Inserts the user, their personal account and the owner membership; `None` when the email is taken. */
    readonly insertUser: (input: {
      readonly id: string
      readonly accountId: string
      readonly email: string
      readonly name: string | null
      readonly passwordHash: string | null
      readonly now: Date
    }) => Effect.Effect<Option.Option<User>>
    readonly findByEmail: (email: string) => Effect.Effect<Option.Option<UserRecord>>
    readonly findById: (id: string) => Effect.Effect<Option.Option<UserRecord>>
    readonly findBySessionToken: (tokenHash: Uint8Array, now: Date) => Effect.Effect<Option.Option<User>>
    readonly insertWebSession: (input: {
      readonly tokenHash: Uint8Array
      readonly userId: string
      readonly now: Date
      readonly expiresAt: Date
    }) => Effect.Effect<void>
    readonly deleteWebSession: (tokenHash: Uint8Array) => Effect.Effect<void>
    /** Ends every dashboard session of the user and invalidates their access tokens. */
    readonly endAllSessions: (userId: string, now: Date) => Effect.Effect<void>
    readonly findByIdentity: (provider: string, subject: string) => Effect.Effect<Option.Option<UserRecord>>
    readonly insertIdentity: (input: {
      readonly provider: string
      readonly subject: string
      readonly userId: string
      readonly email: string | null
      readonly now: Date
    }) => Effect.Effect<void>
  }
>()("rbs/auth/UsersRepo") {
  static readonly layer = Layer.effect(
    UsersRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`u.id, u.email, u.password_hash, u.created_at, u.tokens_valid_after`

      const insertUser = (input: Parameters<UsersRepo["Service"]["insertUser"]>[0]) =>
        Effect.gen(function* () {
          const inserted = yield* sql`
            INSERT INTO users AS u (id, email, name, password_hash, created_at)
            VALUES (${input.id}, ${input.email}, ${input.name}, ${input.passwordHash}, ${input.now})
            ON CONFLICT DO NOTHING
            RETURNING ${columns}`.pipe(decodeAll(UserRow))
          const row = inserted[0]
          if (row === undefined) return Option.none<User>()
          yield* sql`
            INSERT INTO accounts (id, name, kind, created_at)
            VALUES (${input.accountId}, ${input.email}, 'personal', ${input.now})`
          yield* sql`
            INSERT INTO account_members (account_id, user_id, role, joined_at)
            VALUES (${input.accountId}, ${input.id}, 'owner', ${input.now})`
          return Option.some(toRecord(row).user)
        })

      const findByEmail = (email: string) =>
        sql`SELECT ${columns} FROM users u WHERE lower(u.email) = lower(${email})`.pipe(
          decodeAll(UserRow),
          Effect.map(first)
        )

      const findById = (id: string) =>
        sql`SELECT ${columns} FROM users u WHERE u.id = ${id}`.pipe(decodeAll(UserRow), Effect.map(first))

      const findBySessionToken = (tokenHash: Uint8Array, now: Date) =>
        sql`
          SELECT ${columns} FROM web_sessions s JOIN users u ON u.id = s.user_id
          WHERE s.token_hash = ${tokenHash} AND s.expires_at > ${now}`.pipe(
          decodeAll(UserRow),
          Effect.map((rows) => Option.map(first(rows), (record) => record.user))
        )

      const insertWebSession = (input: Parameters<UsersRepo["Service"]["insertWebSession"]>[0]) =>
        sql`
          INSERT INTO web_sessions (token_hash, user_id, created_at, expires_at)
          VALUES (${input.tokenHash}, ${input.userId}, ${input.now}, ${input.expiresAt})`.pipe(Effect.asVoid)

      const deleteWebSession = (tokenHash: Uint8Array) =>
        sql`DELETE FROM web_sessions WHERE token_hash = ${tokenHash}`.pipe(Effect.asVoid)

      const endAllSessions = (userId: string, now: Date) =>
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`DELETE FROM web_sessions WHERE user_id = ${userId}`
            yield* sql`UPDATE users SET tokens_valid_after = ${now} WHERE id = ${userId}`
          })
        )

      const findByIdentity = (provider: string, subject: string) =>
        sql`
          SELECT ${columns} FROM user_identities i JOIN users u ON u.id = i.user_id
          WHERE i.provider = ${provider} AND i.subject = ${subject}`.pipe(
          decodeAll(UserRow),
          Effect.map(first)
        )

      const insertIdentity = (input: Parameters<UsersRepo["Service"]["insertIdentity"]>[0]) =>
        sql`
          INSERT INTO user_identities (provider, subject, user_id, email, created_at)
          VALUES (${input.provider}, ${input.subject}, ${input.userId}, ${input.email}, ${input.now})
          ON CONFLICT DO NOTHING`.pipe(Effect.asVoid)

      return UsersRepo.of(
        Sql.defects({
          insertUser,
          findByEmail,
          findById,
          findBySessionToken,
          insertWebSession,
          deleteWebSession,
          endAllSessions,
          findByIdentity,
          insertIdentity
        })
      )
    })
  )
}
