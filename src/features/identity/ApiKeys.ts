import { Clock, Context, Effect, Layer, Option, Ref } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import { Forbidden, InvalidField, type ResourceLimitReached } from "../../kernel/Errors.ts"
import type { ApiKey, CreatedApiKey, CreateKeyRequest } from "../../kernel/Identity.ts"
import { KeyNotFound, KeyRevoked } from "../../kernel/IdentityErrors.ts"
import { type Owner, type Principal, type Scope, userIdOf } from "../../kernel/Owner.ts"
import { actsAsCaller, inFilter, parseScopes, userKeysOf, withinCallerScopes } from "./KeyRules.ts"
import { type ApiKeyRecord, ApiKeysRepo, type KeyFilter } from "./ApiKeysRepo.ts"
import { KeyCache } from "./KeyCache.ts"
import * as Tokens from "./Tokens.ts"
import { isUuid } from "../../kernel/Ids.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import { AccountBounds } from "../limits/AccountBounds.ts"
import * as Sql from "../../platform/db/Sql.ts"

export const MAX_GRACE_DAYS = 30
export const DEFAULT_GRACE_DAYS = 7
/** How often recorded key uses are written to `last_used_at`. */
export const LAST_USED_FLUSH_MS = 5_000

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

/**
 * API keys: creation (scoped, live or test), listing, revocation, rotation
 * with a grace period, and authentication. A key stops authenticating at its
 * `revoked_at`; use is recorded in memory and written in batches, and at
 * once before the keys are listed, revoked or rotated (on this node).
 */
export class ApiKeys extends Context.Service<
  ApiKeys,
  {
    /** A key acting as the caller (or as `serviceAccountId`), bound to the active account. */
    readonly create: (
      owner: Owner,
      input: CreateKeyRequest,
      serviceAccountId?: string
    ) => Effect.Effect<CreatedApiKey, InvalidField | ResourceLimitReached>
    /** The keys the caller manages, or a service account's. */
    readonly list: (owner: Owner, serviceAccountId?: string) => Effect.Effect<ReadonlyArray<ApiKey>>
    readonly revoke: (
      owner: Owner,
      keyId: string,
      serviceAccountId?: string
    ) => Effect.Effect<void, KeyNotFound>
    /** A new key with the same name, scopes and identity; the old one stops after `graceDays`. */
    readonly rotate: (
      owner: Owner,
      keyId: string,
      graceDays: number | undefined
    ) => Effect.Effect<
      CreatedApiKey,
      KeyNotFound | KeyRevoked | InvalidField | Forbidden | ResourceLimitReached
    >
    /** The principal of a key that authenticates now; `None` otherwise. */
    readonly authenticate: (secret: string) => Effect.Effect<Option.Option<Principal>>
    /**
     * The principal of the key with this id, if it authenticates now: what a
     * credential minted for the key (a session's connect token) acts as, so
     * a revoke or a change of scopes reaches it as it reaches the key.
     */
    readonly authenticateById: (keyId: string) => Effect.Effect<Option.Option<Principal>>
    /** Writes the recorded uses now (also done every few seconds and at shutdown). */
    readonly flushLastUsed: Effect.Effect<void>
  }
>()("rbs/auth/ApiKeys") {
  static readonly layerNoDeps = Layer.effect(
    ApiKeys,
    Effect.gen(function* () {
      const repo = yield* ApiKeysRepo
      const audit = yield* Audit
      const outbox = yield* WebhookOutbox
      const sql = yield* SqlClient.SqlClient
      const pendingUses = yield* Ref.make(new Map<string, Date>())
      const keyCache = yield* KeyCache
      const bounds = yield* AccountBounds

      const insertKey = (
        owner: Owner,
        input: {
          readonly name: string
          readonly scopes: ReadonlyArray<Scope> | null
          readonly mode: "live" | "test"
          readonly createdBy: string | null
          readonly serviceAccountId: string | null
        },
        at: Date
      ) =>
        Effect.gen(function* () {
          const secret = Tokens.newApiKey(input.mode)
          const record = yield* repo.insert({
            id: Crypto.randomUUID(),
            accountId: owner.accountId,
            createdBy: input.createdBy,
            serviceAccountId: input.serviceAccountId,
            name: input.name,
            prefix: Tokens.displayPrefix(secret),
            secretHash: Tokens.sha256(secret),
            scopes: input.scopes,
            mode: input.mode,
            now: at
          })
          return { ...record.key, secret }
        })

      const create = Effect.fn("ApiKeys.create")(function* (
        owner: Owner,
        input: CreateKeyRequest,
        serviceAccountId?: string
      ) {
        const name = input.name.trim()
        if (name.length === 0 || name.length > 100) return yield* new InvalidField({ field: "name" })
        const mode = input.mode ?? "live"
        if (mode !== "live" && mode !== "test") return yield* new InvalidField({ field: "mode" })
        const scopes = yield* parseScopes(input.scopes)
        const principal = owner.principal
        // A scoped key cannot mint a key with more than it has.
        if (!withinCallerScopes(owner, scopes)) return yield* new InvalidField({ field: "scopes" })
        const actingAs =
          serviceAccountId ?? (principal._tag === "ApiKey" ? principal.serviceAccountId : null) ?? null
        const at = yield* now
        const created = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* bounds.reserve("api_keys", owner.accountId, repo.countLive(owner.accountId, at, null))
              const created = yield* insertKey(
                owner,
                { name, scopes, mode, createdBy: userIdOf(owner), serviceAccountId: actingAs },
                at
              )
              yield* outbox.emit(owner.accountId, "key.created", {
                id: created.id,
                name,
                prefix: created.prefix,
                scopes,
                mode,
                service_account_id: actingAs
              })
              yield* audit.record(owner, {
                action: "api_key.created",
                targetType: "api_key",
                targetId: created.id,
                details: { prefix: created.prefix, scopes, mode, service_account_id: actingAs }
              })
              return created
            })
          )
          .pipe(Sql.orDefect)
        yield* Effect.logInfo("api_key.created", { keyId: created.id, accountId: owner.accountId })
        return created
      })

      const filterFor = (owner: Owner, serviceAccountId: string | undefined): KeyFilter =>
        serviceAccountId === undefined ? userKeysOf(owner) : { _tag: "ServiceAccountKeys", serviceAccountId }

      /**
       * Writes the recorded uses. Uses recorded meanwhile stay for the next write; a write that fails
       * puts its uses back, the later of two for one key kept.
       */
      const flushLastUsed = Effect.gen(function* () {
        const uses = yield* Ref.getAndSet(pendingUses, new Map())
        if (uses.size === 0) return
        yield* repo.touch([...uses.entries()]).pipe(
          Effect.onError(() =>
            Ref.update(pendingUses, (later) => {
              for (const [id, at] of uses) if ((later.get(id) ?? at) <= at) later.set(id, at)
              return later
            })
          )
        )
      })

      // The uses this node recorded are written first: a list shows them, and a key revoked or
      // rotated right after a use keeps it.
      const list = (owner: Owner, serviceAccountId?: string) =>
        Effect.andThen(
          flushLastUsed,
          Effect.map(repo.list(owner.accountId, filterFor(owner, serviceAccountId)), (records) =>
            records.map((record) => record.key)
          )
        )

      /** The key, locked, if the caller manages it. */
      const findManaged = (owner: Owner, keyId: string, serviceAccountId: string | undefined) =>
        Effect.gen(function* () {
          const found = isUuid(keyId)
            ? yield* repo.findForUpdate(owner.accountId, keyId)
            : Option.none<ApiKeyRecord>()
          if (Option.isNone(found) || !inFilter(found.value, filterFor(owner, serviceAccountId))) {
            return yield* new KeyNotFound()
          }
          return found.value
        })

      const revoke = Effect.fn("ApiKeys.revoke")(function* (
        owner: Owner,
        keyId: string,
        serviceAccountId?: string
      ) {
        yield* flushLastUsed
        const at = yield* now
        yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const record = yield* findManaged(owner, keyId, serviceAccountId)
              if (record.key.revoked_at !== null && record.key.revoked_at <= at) return
              yield* repo.setRevokedAt(record.key.id, at, null)
              yield* outbox.emit(owner.accountId, "key.revoked", {
                id: record.key.id,
                prefix: record.key.prefix
              })
              yield* audit.record(owner, {
                action: "api_key.revoked",
                targetType: "api_key",
                targetId: record.key.id,
                details: { prefix: record.key.prefix }
              })
            })
          )
          .pipe(Sql.orDefect)
      }, Effect.ensuring(keyCache.clear))

      const rotate = Effect.fn("ApiKeys.rotate")(function* (
        owner: Owner,
        keyId: string,
        graceDays: number | undefined
      ) {
        yield* flushLastUsed
        const grace = graceDays ?? DEFAULT_GRACE_DAYS
        if (!Number.isInteger(grace) || grace < 0 || grace > MAX_GRACE_DAYS) {
          return yield* new InvalidField({ field: "grace_days" })
        }
        const at = yield* now
        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const old = yield* findManaged(owner, keyId, undefined)
              if (!actsAsCaller(owner, old) || !withinCallerScopes(owner, old.key.scopes)) {
                return yield* new Forbidden()
              }
              if (old.key.revoked_at !== null) return yield* new KeyRevoked()
              // The new key takes the old one's place at once without a grace; with one, both are live.
              yield* bounds.reserve(
                "api_keys",
                owner.accountId,
                repo.countLive(owner.accountId, at, grace === 0 ? old.key.id : null),
                "revoke one first, or rotate with grace_days 0"
              )
              const created = yield* insertKey(
                owner,
                {
                  name: old.key.name,
                  scopes: old.key.scopes,
                  mode: old.key.mode,
                  createdBy: old.createdBy,
                  serviceAccountId: old.serviceAccountId
                },
                at
              )
              const end = new Date(at.getTime() + grace * 86_400_000)
              yield* repo.setRevokedAt(old.key.id, end, created.id)
              yield* outbox.emit(owner.accountId, "key.rotated", {
                id: old.key.id,
                new_key_id: created.id,
                old_key_ends_at: end.toISOString()
              })
              yield* audit.record(owner, {
                action: "api_key.rotated",
                targetType: "api_key",
                targetId: old.key.id,
                details: { new_key_id: created.id, grace_days: grace, old_key_ends_at: end.toISOString() }
              })
              return created
            })
          )
          .pipe(Sql.orDefect)
      }, Effect.ensuring(keyCache.clear))

      /** The principal of a key `read` found (through the node's cache, under `cacheKey`), its use recorded. */
      const principalOf = (
        cacheKey: string,
        read: (at: Date) => ReturnType<ApiKeysRepo["Service"]["authenticate"]>
      ) =>
        Effect.gen(function* () {
          const at = yield* now
          const found = yield* keyCache.through(cacheKey, read(at), Option.isSome)
          if (Option.isNone(found)) return Option.none<Principal>()
          const record = found.value
          // Kept from an earlier read: a rotated key's grace may have ended since.
          if (record.key.revoked_at !== null && record.key.revoked_at <= at) return Option.none<Principal>()
          yield* Ref.update(pendingUses, (uses) => uses.set(record.key.id, at))
          return Option.some<Principal>({
            _tag: "ApiKey",
            keyId: record.key.id,
            accountId: record.accountId,
            userId: record.serviceAccountId === null ? record.createdBy : null,
            serviceAccountId: record.serviceAccountId,
            scopes: record.key.scopes,
            mode: record.key.mode,
            role: record.role
          })
        })

      const authenticate = (secret: string) => {
        if (!Tokens.looksLikeApiKey(secret)) return Effect.succeed(Option.none<Principal>())
        const hash = Tokens.sha256(secret)
        return principalOf(Buffer.from(hash).toString("base64"), (at) => repo.authenticate(hash, at))
      }

      const authenticateById = (keyId: string) =>
        principalOf(`id:${keyId}`, (at) => repo.authenticateById(keyId, at))

      yield* Effect.addFinalizer(() => flushLastUsed)
      yield* flushLastUsed.pipe(
        Effect.delay(LAST_USED_FLUSH_MS),
        Effect.catchCause((cause) => Effect.logWarning("api_key.last_used_flush_failed", { cause })),
        Effect.forever,
        Effect.forkScoped
      )

      return ApiKeys.of({ create, list, revoke, rotate, authenticate, authenticateById, flushLastUsed })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(ApiKeysRepo.layer))
}
