import { Clock, Context, Effect, Layer, Option, Result, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import { SshKeyExists, SshKeyNotFound } from "../../kernel/IdentityErrors.ts"
import { type Owner, userIdOf } from "../../kernel/Owner.ts"
import { parseSshPublicKey } from "./SshPublicKey.ts"
import { isUuid } from "../../kernel/Ids.ts"
import { SshKeyInfo } from "../../kernel/Identity.ts"
import * as Sql from "../../platform/db/Sql.ts"

const Row = Schema.Struct({
  id: Schema.String,
  name: Schema.NullOr(Schema.String),
  created_at: Schema.Date,
  fingerprint: Schema.String,
  key_type: Schema.String,
  public_key: Schema.String,
  last_used_at: Schema.NullOr(Schema.Date)
})

const toInfo = (row: typeof Row.Type): SshKeyInfo => ({
  id: row.id,
  name: row.name,
  created_at: row.created_at,
  key_fingerprint: row.fingerprint,
  key_type: row.key_type,
  public_key: row.public_key,
  last_used_at: row.last_used_at
})

const decodeRows = Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(Row)))

/** The SSH public keys of an account (for sandbox and workspace access). */
export class SshKeys extends Context.Service<
  SshKeys,
  {
    readonly add: (
      owner: Owner,
      input: { readonly public_key: string; readonly name?: string | null | undefined }
    ) => Effect.Effect<SshKeyInfo, InvalidField | SshKeyExists>
    readonly list: (owner: Owner) => Effect.Effect<ReadonlyArray<SshKeyInfo>>
    readonly remove: (owner: Owner, id: string) => Effect.Effect<void, SshKeyNotFound>
  }
>()("rbs/ssh/SshKeys") {
  static readonly layer = Layer.effect(
    SshKeys,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* Audit

      const add = Effect.fn("SshKeys.add")(function* (
        owner: Owner,
        input: { readonly public_key: string; readonly name?: string | null | undefined }
      ) {
        const parsed = parseSshPublicKey(input.public_key)
        if (Result.isFailure(parsed)) return yield* new InvalidField({ field: "public_key" })
        const key = parsed.success
        const name = input.name?.trim() || key.comment
        if (name !== null && name.length > 100) return yield* new InvalidField({ field: "name" })
        const at = new Date(yield* Clock.currentTimeMillis)
        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const rows = yield* sql`
                INSERT INTO ssh_keys (id, account_id, name, public_key, key_type, fingerprint, created_by, created_at)
                VALUES (${Crypto.randomUUID()}, ${owner.accountId}, ${name}, ${key.publicKey}, ${key.keyType},
                  ${key.fingerprint}, ${userIdOf(owner)}, ${at})
                ON CONFLICT (account_id, fingerprint) DO NOTHING
                RETURNING *`.pipe(decodeRows)
              const row = rows[0]
              if (row === undefined) return yield* new SshKeyExists()
              yield* audit.record(owner, {
                action: "ssh_key.added",
                targetType: "ssh_key",
                targetId: row.id,
                details: { fingerprint: key.fingerprint, key_type: key.keyType }
              })
              return toInfo(row)
            })
          )
          .pipe(Sql.orDefect)
      })

      const list = (owner: Owner) =>
        sql`SELECT * FROM ssh_keys WHERE account_id = ${owner.accountId} ORDER BY created_at DESC, id DESC`.pipe(
          decodeRows,
          Effect.map((rows) => rows.map(toInfo)),
          Sql.orDefect
        )

      const remove = Effect.fn("SshKeys.remove")(function* (owner: Owner, id: string) {
        if (!isUuid(id)) return yield* new SshKeyNotFound()
        yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const rows = yield* sql<{ readonly fingerprint: string }>`
                DELETE FROM ssh_keys WHERE account_id = ${owner.accountId} AND id = ${id} RETURNING fingerprint`
              const deleted = Option.fromNullishOr(rows[0])
              if (Option.isNone(deleted)) return yield* new SshKeyNotFound()
              yield* audit.record(owner, {
                action: "ssh_key.deleted",
                targetType: "ssh_key",
                targetId: id,
                details: { fingerprint: deleted.value.fingerprint }
              })
            })
          )
          .pipe(Sql.orDefect)
      })

      return SshKeys.of({ add, list, remove })
    })
  )
}
