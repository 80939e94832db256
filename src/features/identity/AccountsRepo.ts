import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type * as Statement from "effect/sql/Statement"
import type { AccountInfo, AccountMemberInfo, ServiceAccountInfo } from "../../kernel/Identity.ts"
import { Role } from "../../kernel/Owner.ts"
import * as Sql from "../../platform/db/Sql.ts"

const AccountRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  kind: Schema.Literals(["personal", "organization"]),
  created_at: Schema.Date,
  role: Role
})

const MemberRow = Schema.Struct({
  user_id: Schema.String,
  email: Schema.String,
  name: Schema.NullOr(Schema.String),
  joined_at: Schema.Date,
  role: Role
})

const ServiceAccountRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  role: Role,
  created_at: Schema.Date,
  created_by: Schema.NullOr(Schema.String)
})

const decodeAll = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) =>
  Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(schema)))

const toAccount = (row: typeof AccountRow.Type): AccountInfo => ({
  ...row,
  personal: row.kind === "personal"
})
const toMember = (row: typeof MemberRow.Type): AccountMemberInfo => ({ ...row, owner: row.role === "owner" })

/** SQL for accounts, memberships and service accounts. Failures here are defects. */
export class AccountsRepo extends Context.Service<
  AccountsRepo,
  {
    /** The user's accounts with their role in each, personal first. */
    readonly listForUser: (userId: string) => Effect.Effect<ReadonlyArray<AccountInfo>>
    /** One account as the user sees it (their role), if they are a member. */
    readonly findForUser: (userId: string, accountId: string) => Effect.Effect<Option.Option<AccountInfo>>
    /** An account by id with a given role (for keys, whose role comes from elsewhere). */
    readonly find: (accountId: string, role: Role) => Effect.Effect<Option.Option<AccountInfo>>
    readonly personalAccountId: (userId: string) => Effect.Effect<string>
    /** Inserts an organization with its first owner; `None` when the name is taken. */
    readonly insertOrganization: (input: {
      readonly id: string
      readonly name: string
      readonly ownerId: string
      readonly now: Date
    }) => Effect.Effect<Option.Option<AccountInfo>>
    readonly listMembers: (accountId: string) => Effect.Effect<ReadonlyArray<AccountMemberInfo>>
    readonly findMember: (
      accountId: string,
      userId: string
    ) => Effect.Effect<Option.Option<AccountMemberInfo>>
    /** `None` when the user is already a member. */
    readonly insertMember: (input: {
      readonly accountId: string
      readonly userId: string
      readonly role: Role
      readonly now: Date
    }) => Effect.Effect<Option.Option<AccountMemberInfo>>
    readonly updateMemberRole: (accountId: string, userId: string, role: Role) => Effect.Effect<void>
    readonly deleteMember: (accountId: string, userId: string) => Effect.Effect<void>
    /**
     * Locks the account row until the transaction ends: owner-count rules,
     * session admission (concurrency) and billing's balance writes (before
     * billing's own row) run under it.
     */
    readonly lock: (accountId: string) => Effect.Effect<void>
    /**
     * `lock` as a part of another statement: the CTE `name`, the row (`id`) of the account in the
     * `account_id` of the CTE `source`'s row, locked; empty when `source` is.
     */
    readonly lockPart: (name: string, source: string) => Statement.Fragment
    readonly countOwners: (accountId: string) => Effect.Effect<number>
    readonly listServiceAccounts: (accountId: string) => Effect.Effect<ReadonlyArray<ServiceAccountInfo>>
    readonly findServiceAccount: (
      accountId: string,
      id: string
    ) => Effect.Effect<Option.Option<ServiceAccountInfo>>
    readonly insertServiceAccount: (input: {
      readonly id: string
      readonly accountId: string
      readonly name: string
      readonly role: Role
      readonly createdBy: string | null
      readonly now: Date
    }) => Effect.Effect<ServiceAccountInfo>
    readonly deleteServiceAccount: (accountId: string, id: string, now: Date) => Effect.Effect<void>
  }
>()("rbs/accounts/AccountsRepo") {
  static readonly layer = Layer.effect(
    AccountsRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      const listForUser = (userId: string) =>
        sql`
          SELECT a.id, a.name, a.kind, a.created_at, m.role
          FROM account_members m JOIN accounts a ON a.id = m.account_id
          WHERE m.user_id = ${userId}
          ORDER BY a.kind = 'personal' DESC, a.created_at, a.id`.pipe(
          decodeAll(AccountRow),
          Effect.map((rows) => rows.map(toAccount))
        )

      const findForUser = (userId: string, accountId: string) =>
        sql`
          SELECT a.id, a.name, a.kind, a.created_at, m.role
          FROM account_members m JOIN accounts a ON a.id = m.account_id
          WHERE m.user_id = ${userId} AND a.id = ${accountId}`.pipe(
          decodeAll(AccountRow),
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toAccount))
        )

      const find = (accountId: string, role: Role) =>
        sql`SELECT id, name, kind, created_at, ${role}::text AS role FROM accounts WHERE id = ${accountId}`.pipe(
          decodeAll(AccountRow),
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toAccount))
        )

      const personalAccountId = (userId: string) =>
        sql<{ readonly id: string }>`
          SELECT a.id FROM account_members m JOIN accounts a ON a.id = m.account_id
          WHERE m.user_id = ${userId} AND a.kind = 'personal'`.pipe(
          Effect.flatMap((rows) =>
            rows[0] === undefined
              ? Effect.die(new Error(`user ${userId} has no personal account`))
              : Effect.succeed(rows[0].id)
          )
        )

      const insertOrganization = (input: {
        readonly id: string
        readonly name: string
        readonly ownerId: string
        readonly now: Date
      }) =>
        Effect.gen(function* () {
          const inserted = yield* sql`
            INSERT INTO accounts (id, name, kind, created_at)
            VALUES (${input.id}, ${input.name}, 'organization', ${input.now})
            ON CONFLICT DO NOTHING
            RETURNING id`
          if (inserted.length === 0) return Option.none<AccountInfo>()
          yield* sql`
            INSERT INTO account_members (account_id, user_id, role, joined_at)
            VALUES (${input.id}, ${input.ownerId}, 'owner', ${input.now})`
          return yield* findForUser(input.ownerId, input.id)
        })

      const memberColumns = sql`m.user_id, u.email, u.name, m.joined_at, m.role`

      const listMembers = (accountId: string) =>
        sql`
          SELECT ${memberColumns} FROM account_members m JOIN users u ON u.id = m.user_id
          WHERE m.account_id = ${accountId} ORDER BY m.joined_at, m.user_id`.pipe(
          decodeAll(MemberRow),
          Effect.map((rows) => rows.map(toMember))
        )

      const findMember = (accountId: string, userId: string) =>
        sql`
          SELECT ${memberColumns} FROM account_members m JOIN users u ON u.id = m.user_id
          WHERE m.account_id = ${accountId} AND m.user_id = ${userId}`.pipe(
          decodeAll(MemberRow),
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toMember))
        )

      const insertMember = (input: {
        readonly accountId: string
        readonly userId: string
        readonly role: Role
        readonly now: Date
      }) =>
        sql`
          INSERT INTO account_members (account_id, user_id, role, joined_at)
          VALUES (${input.accountId}, ${input.userId}, ${input.role}, ${input.now})
          ON CONFLICT DO NOTHING RETURNING user_id`.pipe(
          Effect.flatMap((rows) =>
            rows.length === 0
              ? Effect.succeed(Option.none<AccountMemberInfo>())
              : findMember(input.accountId, input.userId)
          )
        )

      const updateMemberRole = (accountId: string, userId: string, role: Role) =>
        sql`UPDATE account_members SET role = ${role} WHERE account_id = ${accountId} AND user_id = ${userId}`.pipe(
          Effect.asVoid
        )

      const deleteMember = (accountId: string, userId: string) =>
        sql`DELETE FROM account_members WHERE account_id = ${accountId} AND user_id = ${userId}`.pipe(
          Effect.asVoid
        )

      const lock = (accountId: string) =>
        sql`SELECT id FROM accounts WHERE id = ${accountId} FOR UPDATE`.pipe(Effect.asVoid)

      const countOwners = (accountId: string) =>
        sql<{ readonly n: number }>`
          SELECT count(*)::int AS n FROM account_members WHERE account_id = ${accountId} AND role = 'owner'`.pipe(
          Effect.map((rows) => rows[0]?.n ?? 0)
        )

      const serviceAccountColumns = sql`id, name, role, created_at, created_by`

      const listServiceAccounts = (accountId: string) =>
        sql`
          SELECT ${serviceAccountColumns} FROM service_accounts
          WHERE account_id = ${accountId} AND deleted_at IS NULL ORDER BY created_at, id`.pipe(
          decodeAll(ServiceAccountRow)
        )

      const findServiceAccount = (accountId: string, id: string) =>
        sql`
          SELECT ${serviceAccountColumns} FROM service_accounts
          WHERE account_id = ${accountId} AND id = ${id} AND deleted_at IS NULL`.pipe(
          decodeAll(ServiceAccountRow),
          Effect.map((rows) => Option.fromNullishOr(rows[0]))
        )

      const insertServiceAccount = (input: {
        readonly id: string
        readonly accountId: string
        readonly name: string
        readonly role: Role
        readonly createdBy: string | null
        readonly now: Date
      }) =>
        sql`
          INSERT INTO service_accounts (id, account_id, name, role, created_by, created_at)
          VALUES (${input.id}, ${input.accountId}, ${input.name}, ${input.role}, ${input.createdBy}, ${input.now})
          RETURNING ${serviceAccountColumns}`.pipe(
          decodeAll(ServiceAccountRow),
          Effect.map((rows) => rows[0]!)
        )

      const deleteServiceAccount = (accountId: string, id: string, now: Date) =>
        sql`
          UPDATE service_accounts SET deleted_at = ${now}
          WHERE account_id = ${accountId} AND id = ${id} AND deleted_at IS NULL`.pipe(Effect.asVoid)

      const lockPart = (name: string, source: string) =>
        sql`${sql(name)} AS (SELECT id FROM accounts WHERE id = (SELECT account_id FROM ${sql(source)}) FOR UPDATE)`

      return AccountsRepo.of({
        // A fragment to compose, not a statement to run: left as it is.
        lockPart,
        ...Sql.defects({
          listForUser,
          findForUser,
          find,
          personalAccountId,
          insertOrganization,
          listMembers,
          findMember,
          insertMember,
          updateMemberRole,
          deleteMember,
          lock,
          countOwners,
          listServiceAccounts,
          findServiceAccount,
          insertServiceAccount,
          deleteServiceAccount
        })
      })
    })
  )
}
