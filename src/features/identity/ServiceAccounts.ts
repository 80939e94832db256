import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import { ApiKeysRepo } from "./ApiKeysRepo.ts"
import { KeyCache } from "./KeyCache.ts"
import { InvalidField } from "../../kernel/Errors.ts"
import { isUuid } from "../../kernel/Ids.ts"
import type { ServiceAccountInfo } from "../../kernel/Identity.ts"
import { ServiceAccountNotFound } from "../../kernel/IdentityErrors.ts"
import { type Owner, userIdOf } from "../../kernel/Owner.ts"
import { parseRole } from "./Accounts.ts"
import { AccountsRepo } from "./AccountsRepo.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import * as Sql from "../../platform/db/Sql.ts"

/**
 * Non-human members of an account, with a role below owner. Their keys act
 * as them, not as whoever made them; deleting one revokes its keys at once.
 */
export class ServiceAccounts extends Context.Service<
  ServiceAccounts,
  {
    readonly list: (owner: Owner) => Effect.Effect<ReadonlyArray<ServiceAccountInfo>>
    readonly find: (owner: Owner, id: string) => Effect.Effect<ServiceAccountInfo, ServiceAccountNotFound>
    readonly create: (
      owner: Owner,
      input: { readonly name: string; readonly role?: string | null | undefined }
    ) => Effect.Effect<ServiceAccountInfo, InvalidField>
    readonly remove: (owner: Owner, id: string) => Effect.Effect<void, ServiceAccountNotFound>
  }
>()("rbs/accounts/ServiceAccounts") {
  static readonly layerNoDeps = Layer.effect(
    ServiceAccounts,
    Effect.gen(function* () {
      const repo = yield* AccountsRepo
      const keys = yield* ApiKeysRepo
      const keyCache = yield* KeyCache
      const audit = yield* Audit
      const outbox = yield* WebhookOutbox
      const sql = yield* SqlClient.SqlClient
      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const find = (owner: Owner, id: string) =>
        Effect.flatMap(
          isUuid(id) ? repo.findServiceAccount(owner.accountId, id) : Effect.succeed(Option.none()),
          (found) =>
            Option.isSome(found) ? Effect.succeed(found.value) : Effect.fail(new ServiceAccountNotFound())
        )

      const create = Effect.fn("ServiceAccounts.create")(function* (
        owner: Owner,
        input: { readonly name: string; readonly role?: string | null | undefined }
      ) {
        const name = input.name.trim()
        if (name.length === 0 || name.length > 100) return yield* new InvalidField({ field: "name" })
        const role = yield* parseRole(input.role, "member", ["admin", "member", "viewer"])
        const at = yield* now
        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const created = yield* repo.insertServiceAccount({
                id: Crypto.randomUUID(),
                accountId: owner.accountId,
                name,
                role,
                createdBy: userIdOf(owner),
                now: at
              })
              yield* audit.record(owner, {
                action: "service_account.created",
                targetType: "service_account",
                targetId: created.id,
                details: { name, role }
              })
              return created
            })
          )
          .pipe(Sql.orDefect)
      })

      const remove = Effect.fn("ServiceAccounts.remove")(function* (owner: Owner, id: string) {
        const found = yield* find(owner, id)
        const at = yield* now
        yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* repo.deleteServiceAccount(owner.accountId, found.id, at)
              const revoked = yield* keys.revokeServiceAccountKeys(found.id, at)
              yield* Effect.forEach(revoked, (key) => outbox.emit(owner.accountId, "key.revoked", key), {
                discard: true
              })
              yield* audit.record(owner, {
                action: "service_account.deleted",
                targetType: "service_account",
                targetId: found.id
              })
            })
          )
          .pipe(Sql.orDefect)
      }, Effect.ensuring(keyCache.clear))

      return ServiceAccounts.of({
        list: (owner) => repo.listServiceAccounts(owner.accountId),
        find,
        create,
        remove
      })
    })
  )
}
