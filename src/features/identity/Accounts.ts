import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { Audit } from "../audit/Audit.ts"
import { ApiKeysRepo } from "./ApiKeysRepo.ts"
import { KeyCache } from "./KeyCache.ts"
import { UsersRepo } from "./UsersRepo.ts"
import { Forbidden, InvalidField } from "../../kernel/Errors.ts"
import type { AccountInfo, AccountMemberInfo } from "../../kernel/Identity.ts"
import {
  AccountNameTaken,
  AccountNotFound,
  AlreadyMember,
  LastOwner,
  MemberNotFound,
  PersonalAccount,
  UserNotFound
} from "../../kernel/IdentityErrors.ts"
import { type Owner, permits, type Principal, ROLES, type Role, userIdOf } from "../../kernel/Owner.ts"
import { AccountsRepo } from "./AccountsRepo.ts"
import { isUuid } from "../../kernel/Ids.ts"
import { WebhookOutbox } from "../webhooks/Outbox.ts"
import * as Sql from "../../platform/db/Sql.ts"

const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

/** Organization names: what `X-Service-Account` matches, so never an email or `personal`. */
const ORGANIZATION_NAME = /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/

/** A role from a request body: `fallback` when absent, 400 `invalid_field` when not one of `allowed`. */
export const parseRole = (
  raw: string | null | undefined,
  fallback: Role,
  allowed: ReadonlyArray<Role> = ROLES
) =>
  raw === null || raw === undefined
    ? Effect.succeed(fallback)
    : (allowed as ReadonlyArray<string>).includes(raw)
      ? Effect.succeed(raw as Role)
      : Effect.fail(new InvalidField({ field: "role" }))

/** The active account of a request and the caller's role in it. */
export interface ActiveAccount {
  readonly accountId: string
  readonly role: Role
}

/**
 * Accounts: the active-account choice, organizations and members with roles. Who may do what is `permits` over the role table; the
 * rules about owners (only an owner makes or unmakes one, never the last) live here.
 */
export class Accounts extends Context.Service<
  Accounts,
  {
    /**
     * The account a request acts on. A person picks with `selector` (id, exact
     * name or `personal`; default personal, or the account an access token was
     * minted for); a key is bound to its account, and naming another is 403.
     */
    readonly resolve: (
      principal: Principal,
      selector: string | undefined
    ) => Effect.Effect<ActiveAccount, AccountNotFound | Forbidden>
    readonly list: (principal: Principal) => Effect.Effect<ReadonlyArray<AccountInfo>>
    readonly current: (owner: Owner) => Effect.Effect<AccountInfo>
    readonly personalAccountId: (userId: string) => Effect.Effect<string>
    readonly exists: (accountId: string) => Effect.Effect<boolean>
    readonly createOrganization: (
      owner: Owner,
      input: { readonly name: string }
    ) => Effect.Effect<AccountInfo, InvalidField | AccountNameTaken | Forbidden>
    readonly listMembers: (owner: Owner) => Effect.Effect<ReadonlyArray<AccountMemberInfo>>
    readonly addMember: (
      owner: Owner,
      input: { readonly email: string; readonly role?: string | null | undefined }
    ) => Effect.Effect<
      { readonly account: AccountInfo; readonly member: AccountMemberInfo },
      InvalidField | UserNotFound | AlreadyMember | PersonalAccount | Forbidden
    >
    readonly updateMember: (
      owner: Owner,
      userId: string,
      input: { readonly role: string }
    ) => Effect.Effect<AccountMemberInfo, InvalidField | MemberNotFound | LastOwner | Forbidden>
    /** Removes a member (or lets a member leave); their keys in the account are revoked. */
    readonly removeMember: (
      owner: Owner,
      userId: string
    ) => Effect.Effect<void, MemberNotFound | LastOwner | Forbidden>
  }
>()("rbs/accounts/Accounts") {
  static readonly layerNoDeps = Layer.effect(
    Accounts,
    Effect.gen(function* () {
      const repo = yield* AccountsRepo
      const users = yield* UsersRepo
      const keys = yield* ApiKeysRepo
      const keyCache = yield* KeyCache
      const audit = yield* Audit
      const outbox = yield* WebhookOutbox
      const sql = yield* SqlClient.SqlClient
      const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        sql.withTransaction(effect).pipe(Sql.orDefect)

      const resolve = Effect.fn("Accounts.resolve")(function* (
        principal: Principal,
        selector: string | undefined
      ) {
        switch (principal._tag) {
          case "System":
            return yield* new AccountNotFound()
          // A runtime acts in its assistant's account alone, and holds no role's permissions.
          case "Assistant":
            return selector === undefined || selector === principal.accountId
              ? { accountId: principal.accountId, role: "viewer" as const }
              : yield* new Forbidden()
          case "ApiKey": {
            if (selector === undefined) return { accountId: principal.accountId, role: principal.role }
            const account = yield* repo.find(principal.accountId, principal.role)
            const matches = Option.exists(
              account,
              (a) => a.id === selector || a.name === selector || (selector === "personal" && a.personal)
            )
            if (!matches) return yield* new Forbidden()
            return { accountId: principal.accountId, role: principal.role }
          }
          case "User": {
            const wanted = selector ?? principal.tokenAccountId ?? "personal"
            const accounts = yield* repo.listForUser(principal.userId)
            const found = accounts.find((a) =>
              wanted === "personal" ? a.personal : isUuid(wanted) ? a.id === wanted : a.name === wanted
            )
            if (found === undefined) return yield* new AccountNotFound()
            return { accountId: found.id, role: found.role }
          }
        }
      })

      const list = (principal: Principal) =>
        principal._tag === "User"
          ? repo.listForUser(principal.userId)
          : principal._tag === "ApiKey"
            ? Effect.map(repo.find(principal.accountId, principal.role), Option.toArray)
            : Effect.succeed([])

      const current = (owner: Owner) =>
        Effect.flatMap(repo.find(owner.accountId, owner.role), (account) =>
          Option.isSome(account)
            ? Effect.succeed(account.value)
            : Effect.die(new Error(`account ${owner.accountId} vanished`))
        )

      const createOrganization = Effect.fn("Accounts.createOrganization")(function* (
        owner: Owner,
        input: { readonly name: string }
      ) {
        const userId = userIdOf(owner)
        if (userId === null) return yield* new Forbidden()
        const name = input.name.trim()
        if (!ORGANIZATION_NAME.test(name) || name.toLowerCase() === "personal") {
          return yield* new InvalidField({ field: "name" })
        }
        const id = Crypto.randomUUID()
        const at = yield* now
        return yield* transaction(
          Effect.gen(function* () {
            const created = yield* repo.insertOrganization({ id, name, ownerId: userId, now: at })
            if (Option.isNone(created)) return yield* new AccountNameTaken()
            yield* audit.record(
              { ...owner, accountId: id, role: "owner" },
              { action: "organization.created", targetType: "account", targetId: id, details: { name } }
            )
            return created.value
          })
        )
      })

      /** Making, unmaking or removing an owner takes an owner. */
      const checkOwnerChange = (owner: Owner, touchesOwner: boolean) =>
        touchesOwner && !permits(owner, "accounts.owner") ? Effect.fail(new Forbidden()) : Effect.void

      const addMember = Effect.fn("Accounts.addMember")(function* (
        owner: Owner,
        input: { readonly email: string; readonly role?: string | null | undefined }
      ) {
        const role = yield* parseRole(input.role, "member")
        yield* checkOwnerChange(owner, role === "owner")
        const account = yield* current(owner)
        if (account.personal) return yield* new PersonalAccount()
        const user = yield* users.findByEmail(input.email.trim())
        if (Option.isNone(user)) return yield* new UserNotFound()
        const at = yield* now
        const member = yield* transaction(
          Effect.gen(function* () {
            const member = yield* repo.insertMember({
              accountId: owner.accountId,
              userId: user.value.user.id,
              role,
              now: at
            })
            if (Option.isNone(member)) return yield* new AlreadyMember()
            yield* outbox.emit(owner.accountId, "member.added", { user_id: member.value.user_id, role })
            yield* audit.record(owner, {
              action: "member.added",
              targetType: "user",
              targetId: member.value.user_id,
              details: { role }
            })
            return member.value
          })
        )
        return { account, member }
      })

      /** The member, under the account's lock, with the owner count. */
      const lockedMember = (owner: Owner, userId: string) =>
        Effect.gen(function* () {
          yield* repo.lock(owner.accountId)
          const member = isUuid(userId)
            ? yield* repo.findMember(owner.accountId, userId)
            : Option.none<AccountMemberInfo>()
          if (Option.isNone(member)) return yield* new MemberNotFound()
          return { member: member.value, owners: yield* repo.countOwners(owner.accountId) }
        })

      const updateMember = Effect.fn("Accounts.updateMember")(function* (
        owner: Owner,
        userId: string,
        input: { readonly role: string }
      ) {
        const role = yield* parseRole(input.role, "member")
        return yield* transaction(
          Effect.gen(function* () {
            const { member, owners } = yield* lockedMember(owner, userId)
            yield* checkOwnerChange(owner, role === "owner" || member.role === "owner")
            if (member.role === "owner" && role !== "owner" && owners <= 1) return yield* new LastOwner()
            if (member.role === role) return member
            yield* repo.updateMemberRole(owner.accountId, member.user_id, role)
            yield* audit.record(owner, {
              action: "member.role_changed",
              targetType: "user",
              targetId: member.user_id,
              details: { from: member.role, to: role }
            })
            return { ...member, role, owner: role === "owner" }
          })
        )
      }, Effect.ensuring(keyCache.clear))

      const removeMember = Effect.fn("Accounts.removeMember")(function* (owner: Owner, userId: string) {
        const leaving = userId === userIdOf(owner)
        if (!leaving && !permits(owner, "accounts.admin")) return yield* new Forbidden()
        const at = yield* now
        yield* transaction(
          Effect.gen(function* () {
            const { member, owners } = yield* lockedMember(owner, userId)
            if (!leaving) yield* checkOwnerChange(owner, member.role === "owner")
            if (member.role === "owner" && owners <= 1) return yield* new LastOwner()
            yield* repo.deleteMember(owner.accountId, member.user_id)
            const revoked = yield* keys.revokeUserKeys(owner.accountId, member.user_id, at)
            yield* Effect.forEach(revoked, (key) => outbox.emit(owner.accountId, "key.revoked", key), {
              discard: true
            })
            yield* outbox.emit(owner.accountId, "member.removed", {
              user_id: member.user_id,
              role: member.role,
              left: leaving
            })
            yield* audit.record(owner, {
              action: leaving ? "member.left" : "member.removed",
              targetType: "user",
              targetId: member.user_id,
              details: { role: member.role }
            })
          })
        )
      }, Effect.ensuring(keyCache.clear))

      return Accounts.of({
        resolve,
        list,
        current,
        personalAccountId: repo.personalAccountId,
        exists: (accountId) =>
          isUuid(accountId)
            ? Effect.map(repo.find(accountId, "owner"), Option.isSome)
            : Effect.succeed(false),
        createOrganization,
        listMembers: (owner) => repo.listMembers(owner.accountId),
        addMember,
        updateMember,
        removeMember
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide(Layer.mergeAll(AccountsRepo.layer, UsersRepo.layer, ApiKeysRepo.layer))
  )
}
