import { Clock, Context, Effect, Layer, Option, Redacted } from "effect"
import * as Sql from "../../platform/db/Sql.ts"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import { Secrets } from "../../platform/crypto/Secrets.ts"
import {
  AssistantConflict,
  type AssistantNotFound,
  CredentialNotFound,
  type PutCredentialRequest,
  type ResolveCredentialRequest
} from "../../kernel/Assistant.ts"
import {
  type BindChannelRequest,
  type ChannelInfo,
  ChannelNotFound,
  type ResolveChannelRequest
} from "../../kernel/AssistantChannel.ts"
import { Forbidden, InvalidField } from "../../kernel/Errors.ts"
import { isUuid } from "../../kernel/Ids.ts"
import type { Owner } from "../../kernel/Owner.ts"
import { isSlug } from "../../kernel/Workspace.ts"
import * as Sealed from "../../platform/crypto/Sealed.ts"
import { findAssistantRow } from "./AssistantRows.ts"

const CREDENTIAL_NAME = /^[A-Za-z0-9_.-]{1,128}$/
const MAX_SECRET_BYTES = 16 * 1024
const MAX_CHANNEL_CONFIG_BYTES = 16 * 1024

export interface CredentialRecord {
  readonly name: string
  readonly assistant_id: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

interface ChannelRow {
  readonly id: string
  readonly assistant_id: string
  readonly kind: ChannelInfo["kind"]
  readonly name: string
  readonly config: Record<string, unknown>
  readonly secret_ciphertext: string | null
  readonly created_at: Date
}

const channelInfo = (row: ChannelRow): ChannelInfo => ({
  id: row.id,
  object: "assistant_channel",
  assistant_id: row.assistant_id,
  kind: row.kind,
  name: row.name,
  config: row.config,
  has_secret: row.secret_ciphertext !== null,
  created_at: row.created_at
})

/** The runtime's own call alone: a member's credential is refused (the values are the runtime's). */
const runtimeOnly = (owner: Owner) =>
  owner.principal._tag === "Assistant"
    ? Effect.succeed(owner.principal.assistantId)
    : Effect.fail(new Forbidden())

/**
 * What an assistant's runtime holds in trust: credentials (an account's or
 * one assistant's) and its channels' bindings. Secrets are encrypted at rest
 * (AES-256-GCM under the service's key, as webhook secrets) and leave only to
 * the runtime, each resolution audited by name.
 */
export class AssistantVault extends Context.Service<
  AssistantVault,
  {
    readonly putCredential: (
      owner: Owner,
      input: PutCredentialRequest
    ) => Effect.Effect<CredentialRecord, InvalidField | AssistantNotFound>
    readonly resolveCredential: (
      owner: Owner,
      input: ResolveCredentialRequest
    ) => Effect.Effect<
      { readonly name: string; readonly value: string; readonly scope: "assistant" | "account" },
      InvalidField | CredentialNotFound | Forbidden
    >
    readonly bindChannel: (
      owner: Owner,
      assistantId: string,
      input: BindChannelRequest
    ) => Effect.Effect<ChannelInfo, InvalidField | AssistantNotFound | AssistantConflict>
    readonly unbindChannel: (
      owner: Owner,
      assistantId: string,
      bindingId: string
    ) => Effect.Effect<void, AssistantNotFound | ChannelNotFound>
    readonly resolveChannel: (
      owner: Owner,
      input: ResolveChannelRequest
    ) => Effect.Effect<ChannelInfo & { readonly secret: string | null }, ChannelNotFound | Forbidden>
  }
>()("rbs/assistants/AssistantVault") {
  static readonly layer = Layer.effect(
    AssistantVault,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const audit = yield* Audit
      const key = Redacted.value((yield* Secrets).secretsAtRestKey)
      const findRow = findAssistantRow(sql)
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const putCredential = Effect.fn("AssistantVault.putCredential")(function* (
        owner: Owner,
        input: PutCredentialRequest
      ) {
        if (!CREDENTIAL_NAME.test(input.name)) return yield* new InvalidField({ field: "name" })
        if (Buffer.byteLength(input.value, "utf8") > MAX_SECRET_BYTES)
          return yield* new InvalidField({ field: "value" })
        const assistantId = input.assistant_id ?? null
        if (assistantId !== null) yield* findRow(owner, assistantId)
        const at = yield* now
        const sealed = Sealed.encrypt(key, input.value)
        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const [row] = yield* sql<CredentialRecord>`
                INSERT INTO assistant_credentials (id, account_id, assistant_id, name, value_ciphertext, created_at,
                  updated_at)
                VALUES (${Crypto.randomUUID()}, ${owner.accountId}, ${assistantId}, ${input.name}, ${sealed}, ${at}, ${at})
                ON CONFLICT (account_id, coalesce(assistant_id, '00000000-0000-0000-0000-000000000000'::uuid), name)
                DO UPDATE SET value_ciphertext = excluded.value_ciphertext, updated_at = excluded.updated_at
                RETURNING name, assistant_id, created_at, updated_at`
              yield* audit.record(owner, {
                action: "assistant_credential.set",
                targetType: "assistant_credential",
                targetId: input.name,
                details: { assistant_id: assistantId }
              })
              return row!
            })
          )
          .pipe(Sql.orDefect)
      })

      const resolveCredential = Effect.fn("AssistantVault.resolveCredential")(function* (
        owner: Owner,
        input: ResolveCredentialRequest
      ) {
        const assistantId = yield* runtimeOnly(owner)
        if (!CREDENTIAL_NAME.test(input.name)) return yield* new InvalidField({ field: "name" })
        // The assistant's own value wins over the account's.
        const [row] = yield* sql<{ readonly value_ciphertext: string; readonly assistant_id: string | null }>`
          SELECT value_ciphertext, assistant_id FROM assistant_credentials
          WHERE account_id = ${owner.accountId} AND name = ${input.name}
            AND (assistant_id = ${assistantId} OR assistant_id IS NULL)
          ORDER BY assistant_id NULLS LAST LIMIT 1`.pipe(Sql.orDefect)
        const found = Option.fromNullishOr(row)
        yield* audit.record(owner, {
          action: "assistant_credential.resolved",
          targetType: "assistant_credential",
          targetId: input.name,
          outcome: Option.isSome(found) ? "success" : "failure",
          details: { assistant_id: assistantId }
        })
        if (Option.isNone(found)) return yield* new CredentialNotFound()
        return {
          name: input.name,
          value: Sealed.decrypt(key, found.value.value_ciphertext),
          scope: found.value.assistant_id === null ? ("account" as const) : ("assistant" as const)
        }
      })

      const bindChannel = Effect.fn("AssistantVault.bindChannel")(function* (
        owner: Owner,
        assistantId: string,
        input: BindChannelRequest
      ) {
        yield* findRow(owner, assistantId)
        if (!isSlug(input.name)) return yield* new InvalidField({ field: "name" })
        const config = input.config ?? {}
        if (Buffer.byteLength(JSON.stringify(config)) > MAX_CHANNEL_CONFIG_BYTES)
          return yield* new InvalidField({ field: "config" })
        if (input.secret !== undefined && Buffer.byteLength(input.secret) > MAX_SECRET_BYTES)
          return yield* new InvalidField({ field: "secret" })
        const at = yield* now
        const id = Crypto.randomUUID()
        const row = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const [inserted] = yield* sql<ChannelRow>`
                INSERT INTO assistant_channels (id, assistant_id, account_id, kind, name, config, secret_ciphertext,
                  created_at)
                VALUES (${id}, ${assistantId}, ${owner.accountId}, ${input.kind}, ${input.name},
                  ${JSON.stringify(config)}::jsonb, ${input.secret === undefined ? null : Sealed.encrypt(key, input.secret)},
                  ${at})
                ON CONFLICT (assistant_id, name) DO NOTHING RETURNING *`
              if (inserted === undefined) return undefined
              yield* audit.record(owner, {
                action: "assistant_channel.bound",
                targetType: "assistant",
                targetId: assistantId,
                details: { channel_id: id, kind: input.kind, name: input.name }
              })
              return inserted
            })
          )
          .pipe(Sql.orDefect)
        if (row === undefined)
          return yield* new AssistantConflict({
            detail: `The assistant has a channel named ${input.name} already.`
          })
        return channelInfo(row)
      })

      const unbindChannel = Effect.fn("AssistantVault.unbindChannel")(function* (
        owner: Owner,
        assistantId: string,
        bindingId: string
      ) {
        yield* findRow(owner, assistantId)
        if (!isUuid(bindingId)) return yield* new ChannelNotFound()
        const removed = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const rows = yield* sql<{ readonly id: string }>`
                DELETE FROM assistant_channels WHERE id = ${bindingId} AND assistant_id = ${assistantId}
                RETURNING id`
              if (rows.length > 0)
                yield* audit.record(owner, {
                  action: "assistant_channel.unbound",
                  targetType: "assistant",
                  targetId: assistantId,
                  details: { channel_id: bindingId }
                })
              return rows.length > 0
            })
          )
          .pipe(Sql.orDefect)
        if (!removed) return yield* new ChannelNotFound()
      })

      const resolveChannel = Effect.fn("AssistantVault.resolveChannel")(function* (
        owner: Owner,
        input: ResolveChannelRequest
      ) {
        const assistantId = yield* runtimeOnly(owner)
        const [row] = yield* sql<ChannelRow>`
          SELECT * FROM assistant_channels WHERE assistant_id = ${assistantId}
            AND ${isUuid(input.name) ? sql`id = ${input.name}::uuid` : sql`name = ${input.name}`}`.pipe(
          Sql.orDefect
        )
        yield* audit.record(owner, {
          action: "assistant_channel.resolved",
          targetType: "assistant",
          targetId: assistantId,
          outcome: row === undefined ? "failure" : "success",
          details: { channel: input.name.slice(0, 200) }
        })
        if (row === undefined) return yield* new ChannelNotFound()
        return {
          ...channelInfo(row),
          secret: row.secret_ciphertext === null ? null : Sealed.decrypt(key, row.secret_ciphertext)
        }
      })

      return AssistantVault.of({
        putCredential,
        resolveCredential,
        bindChannel,
        unbindChannel,
        resolveChannel
      })
    })
  )
}
