import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { type ApiKey, KeyMode } from "../../kernel/Identity.ts"
import { isUuid } from "../../kernel/Ids.ts"
import { Role, Scope } from "../../kernel/Owner.ts"
import * as Sql from "../../platform/db/Sql.ts"

const ApiKeyRow = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  created_by: Schema.NullOr(Schema.String),
  service_account_id: Schema.NullOr(Schema.String),
  name: Schema.String,
  prefix: Schema.String,
  created_at: Schema.Date,
  last_used_at: Schema.NullOr(Schema.Date),
  revoked_at: Schema.NullOr(Schema.Date),
  scopes: Schema.NullOr(Schema.Array(Scope)),
  mode: KeyMode
})
type ApiKeyRow = typeof ApiKeyRow.Type

const AuthenticatedRow = Schema.Struct({ ...ApiKeyRow.fields, role: Schema.NullOr(Role) })

const decodeAll = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) =>
  Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(schema)))

/** A key as the API shows it, with whom it acts for. */
export interface ApiKeyRecord {
  readonly key: ApiKey
  readonly accountId: string
  /** The user who made it (null once that user is deleted). */
  readonly createdBy: string | null
  readonly serviceAccountId: string | null
}

const toRecord = (row: ApiKeyRow): ApiKeyRecord => ({
  key: {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    created_at: row.created_at,
    last_used_at: row.last_used_at,
    revoked_at: row.revoked_at,
    scopes: row.scopes,
    mode: row.mode,
    service_account_id: row.service_account_id
  },
  accountId: row.account_id,
  createdBy: row.created_by,
  serviceAccountId: row.service_account_id
})

/** Which keys of an account a list shows. */
export type KeyFilter =
  | { readonly _tag: "UserKeys"; readonly userId: string | null }
  | { readonly _tag: "ServiceAccountKeys"; readonly serviceAccountId: string }

/** A key a bulk revocation ended. */
export interface RevokedKey {
  readonly id: string
  readonly prefix: string
}

/** SQL for API keys. Failures here are defects. */
export class ApiKeysRepo extends Context.Service<
  ApiKeysRepo,
  {
    readonly insert: (input: {
      readonly id: string
      readonly accountId: string
      readonly createdBy: string | null
      readonly serviceAccountId: string | null
      readonly name: string
      readonly prefix: string
      readonly secretHash: Uint8Array
      readonly scopes: ReadonlyArray<Scope> | null
      readonly mode: KeyMode
      readonly now: Date
    }) => Effect.Effect<ApiKeyRecord>
    /** Newest first. A user filter of `null` lists every user's key. */
    readonly list: (accountId: string, filter: KeyFilter) => Effect.Effect<ReadonlyArray<ApiKeyRecord>>
    /** The account's keys that authenticate at `now` (not revoked, or in a rotation's grace), but `except`. */
    readonly countLive: (accountId: string, now: Date, except: string | null) => Effect.Effect<number>
    /** A key of the account, locked for the transaction. */
    readonly findForUpdate: (accountId: string, keyId: string) => Effect.Effect<Option.Option<ApiKeyRecord>>
    /** Sets when the key stops authenticating (and the key that replaced it). */
    readonly setRevokedAt: (keyId: string, at: Date, replacedBy: string | null) => Effect.Effect<void>
    /** Revokes a departing member's keys in the account. */
    /** The keys it revoked (for their `key.revoked` events). */
    readonly revokeUserKeys: (
      accountId: string,
      userId: string,
      at: Date
    ) => Effect.Effect<ReadonlyArray<RevokedKey>>
    readonly revokeServiceAccountKeys: (
      serviceAccountId: string,
      at: Date
    ) => Effect.Effect<ReadonlyArray<RevokedKey>>
    /**
     * The key with this hash if it still authenticates at `now`, with the role
     * it acts with: its service account's, or its user's membership role. A
     * user key whose user left the account, or a deleted service account's, is `None`.
     */
    readonly authenticate: (
      secretHash: Uint8Array,
      now: Date
    ) => Effect.Effect<Option.Option<ApiKeyRecord & { readonly role: Role }>>
    /** `authenticate` of the key with this id: what a credential minted for it acts as now. */
    readonly authenticateById: (
      keyId: string,
      now: Date
    ) => Effect.Effect<Option.Option<ApiKeyRecord & { readonly role: Role }>>
    /** Records last use, many keys in one statement. */
    readonly touch: (uses: ReadonlyArray<readonly [keyId: string, at: Date]>) => Effect.Effect<void>
    /** What these keys are shown as (their prefix and name), revoked ones too, in one query. */
    readonly labels: (
      keyIds: ReadonlyArray<string>
    ) => Effect.Effect<ReadonlyMap<string, { readonly prefix: string; readonly name: string }>>
  }
>()("rbs/auth/ApiKeysRepo") {
  static readonly layer = Layer.effect(
    ApiKeysRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      const insert = (input: Parameters<ApiKeysRepo["Service"]["insert"]>[0]) => {
        const scopes = input.scopes === null ? null : input.scopes.join(",")
        return sql`
          INSERT INTO api_keys (id, account_id, created_by, service_account_id, name, prefix, secret_hash, scopes, mode, created_at)
          VALUES (${input.id}, ${input.accountId}, ${input.createdBy}, ${input.serviceAccountId}, ${input.name},
            ${input.prefix}, ${input.secretHash}, string_to_array(${scopes}::text, ','), ${input.mode}, ${input.now})
          RETURNING *`.pipe(
          decodeAll(ApiKeyRow),
          Effect.map((rows) => toRecord(rows[0]!))
        )
      }

      const list = (accountId: string, filter: KeyFilter) => {
        const condition =
          filter._tag === "ServiceAccountKeys"
            ? sql`service_account_id = ${filter.serviceAccountId}`
            : filter.userId === null
              ? sql`service_account_id IS NULL`
              : sql`service_account_id IS NULL AND created_by = ${filter.userId}`
        return sql`
          SELECT * FROM api_keys WHERE account_id = ${accountId} AND ${condition}
          ORDER BY created_at DESC, id DESC`.pipe(
          decodeAll(ApiKeyRow),
          Effect.map((rows) => rows.map(toRecord))
        )
      }

      const countLive = (accountId: string, now: Date, except: string | null) =>
        sql<{ readonly n: number }>`
          SELECT count(*)::int AS n FROM api_keys
          WHERE account_id = ${accountId} AND (revoked_at IS NULL OR revoked_at > ${now})
            AND id IS DISTINCT FROM ${except}::uuid`.pipe(Effect.map((rows) => rows[0]?.n ?? 0))

      const findForUpdate = (accountId: string, keyId: string) =>
        sql`SELECT * FROM api_keys WHERE account_id = ${accountId} AND id = ${keyId} FOR UPDATE`.pipe(
          decodeAll(ApiKeyRow),
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toRecord))
        )

      const setRevokedAt = (keyId: string, at: Date, replacedBy: string | null) =>
        sql`
          UPDATE api_keys SET revoked_at = ${at}, replaced_by = COALESCE(${replacedBy}::uuid, replaced_by)
          WHERE id = ${keyId}`.pipe(Effect.asVoid)

      const revokeUserKeys = (accountId: string, userId: string, at: Date) =>
        sql`
          UPDATE api_keys SET revoked_at = ${at}
          WHERE account_id = ${accountId} AND created_by = ${userId} AND service_account_id IS NULL
            AND (revoked_at IS NULL OR revoked_at > ${at})
          RETURNING id, prefix`.pipe(
          Effect.map((rows) =>
            rows.map((row) => ({ id: String(row.id), prefix: String(row.prefix) }) satisfies RevokedKey)
          )
        )

      const revokeServiceAccountKeys = (serviceAccountId: string, at: Date) =>
        sql`
          UPDATE api_keys SET revoked_at = ${at}
          WHERE service_account_id = ${serviceAccountId} AND (revoked_at IS NULL OR revoked_at > ${at})
          RETURNING id, prefix`.pipe(
          Effect.map((rows) =>
            rows.map((row) => ({ id: String(row.id), prefix: String(row.prefix) }) satisfies RevokedKey)
          )
        )

      /** The key `which` names if it still authenticates at `now`, with the role it acts with. */
      const authenticated = (which: Statement.Fragment, now: Date) =>
        sql`
          SELECT k.*, COALESCE(sa.role, m.role) AS role
          FROM api_keys k
          LEFT JOIN service_accounts sa ON sa.id = k.service_account_id AND sa.deleted_at IS NULL
          LEFT JOIN account_members m
            ON k.service_account_id IS NULL AND m.account_id = k.account_id AND m.user_id = k.created_by
          WHERE ${which} AND (k.revoked_at IS NULL OR k.revoked_at > ${now})`.pipe(
          decodeAll(AuthenticatedRow),
          Effect.map((rows) => {
            const row = rows[0]
            return row === undefined || row.role === null
              ? Option.none()
              : Option.some({ ...toRecord(row), role: row.role })
          })
        )

      const authenticate = (secretHash: Uint8Array, now: Date) =>
        authenticated(sql`k.secret_hash = ${secretHash}`, now)

      const authenticateById = (keyId: string, now: Date) =>
        isUuid(keyId) ? authenticated(sql`k.id = ${keyId}`, now) : Effect.succeed(Option.none())

      const touch = (uses: ReadonlyArray<readonly [string, Date]>) =>
        uses.length === 0
          ? Effect.void
          : sql`
              UPDATE api_keys k SET last_used_at = GREATEST(k.last_used_at, u.at)
              FROM unnest(
                string_to_array(${uses.map(([id]) => id).join(",")}::text, ',')::uuid[],
                string_to_array(${uses.map(([, at]) => at.toISOString()).join(",")}::text, ',')::timestamptz[]
              )
                AS u(id, at)
              WHERE k.id = u.id`.pipe(Effect.asVoid)

      const labels = (keyIds: ReadonlyArray<string>) =>
        keyIds.length === 0
          ? Effect.succeed(new Map<string, { readonly prefix: string; readonly name: string }>())
          : sql<{ readonly id: string; readonly prefix: string; readonly name: string }>`
              SELECT id::text AS id, prefix, name FROM api_keys WHERE id = ANY (${keyIds}::uuid[])`.pipe(
              Effect.map(
                (rows) => new Map(rows.map((row) => [row.id, { prefix: row.prefix, name: row.name }]))
              )
            )

      return ApiKeysRepo.of(
        Sql.defects({
          labels,
          insert,
          list,
          countLive,
          findForUpdate,
          setRevokedAt,
          revokeUserKeys,
          revokeServiceAccountKeys,
          authenticate,
          authenticateById,
          touch
        })
      )
    })
  )
}
