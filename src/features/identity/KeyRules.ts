import { Effect } from "effect"
import { InvalidField } from "../../kernel/Errors.ts"
import { type Owner, permits, SCOPES, type Scope, userIdOf } from "../../kernel/Owner.ts"
import type { ApiKeyRecord, KeyFilter } from "./ApiKeysRepo.ts"

// Who may hold, see, rotate and revoke which API keys: the rules `ApiKeys` applies.

export const parseScopes = (raw: ReadonlyArray<string> | null | undefined) =>
  Effect.gen(function* () {
    if (raw === null || raw === undefined) return null
    const known = new Set<string>(SCOPES)
    if (raw.length === 0 || raw.some((scope) => !known.has(scope))) {
      return yield* new InvalidField({ field: "scopes" })
    }
    return [...new Set(raw)] as ReadonlyArray<Scope>
  })

/** Whose keys an owner manages: admins all user keys of the account, others their own. */
export const userKeysOf = (owner: Owner): KeyFilter =>
  owner.principal._tag === "ApiKey" && owner.principal.serviceAccountId !== null
    ? { _tag: "ServiceAccountKeys", serviceAccountId: owner.principal.serviceAccountId }
    : permits(owner, "accounts.admin")
      ? { _tag: "UserKeys", userId: null }
      : { _tag: "UserKeys", userId: userIdOf(owner) }

/** Whether a caller may hold a key with `scopes`: a scoped key only within its own. */
export const withinCallerScopes = (owner: Owner, scopes: ReadonlyArray<Scope> | null) => {
  const principal = owner.principal
  if (principal._tag !== "ApiKey" || principal.scopes === null) return true
  const allowed = new Set<string>(principal.scopes)
  return scopes !== null && scopes.every((scope) => allowed.has(scope))
}

/**
 * Whether a key acts as the caller: their own user key, or (for a service
 * account's key) a key of that service account. Rotating hands out a new
 * secret with the old key's identity, so nobody may rotate another's key
 * (an admin revokes it instead).
 */
export const actsAsCaller = (owner: Owner, record: ApiKeyRecord) => {
  const principal = owner.principal
  const callerServiceAccount = principal._tag === "ApiKey" ? principal.serviceAccountId : null
  return record.serviceAccountId !== null
    ? record.serviceAccountId === callerServiceAccount
    : callerServiceAccount === null && record.createdBy === userIdOf(owner)
}

export const inFilter = (record: ApiKeyRecord, filter: KeyFilter) =>
  filter._tag === "ServiceAccountKeys"
    ? record.serviceAccountId === filter.serviceAccountId
    : record.serviceAccountId === null && (filter.userId === null || record.createdBy === filter.userId)
