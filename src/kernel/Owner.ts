import { Schema } from "effect"
import { SCOPES } from "./Scopes.ts"

export { SCOPES } from "./Scopes.ts"
export const Scope = Schema.Literals(SCOPES)
export type Scope = typeof Scope.Type

export const ROLES = ["owner", "admin", "member", "viewer"] as const
export const Role = Schema.Literals(ROLES)
export type Role = typeof Role.Type

/**
 * What a route needs: a scope, or one of the account permissions no key scope
 * grants (only a full-access key, the cookie or an access token of a user
 * whose role holds them): `accounts.member` (the member list, leaving),
 * `accounts.admin`, `accounts.owner`.
 */
export type Permission = Scope | "accounts.member" | "accounts.admin" | "accounts.owner"

const VIEWER: ReadonlyArray<Permission> = [
  "accounts.member",
  "sessions.read",
  "workspaces.read",
  "files.read",
  "billing.read",
  "webhooks.read",
  "images.read"
]
const MEMBER: ReadonlyArray<Permission> = [
  ...VIEWER,
  "sessions.write",
  "workspaces.write",
  "exec.write",
  "files.write",
  "keys.read",
  "keys.write",
  "images.write"
]
const ADMIN: ReadonlyArray<Permission> = [
  ...MEMBER,
  "billing.write",
  "audit.read",
  "webhooks.write",
  "accounts.admin"
]

/** The one table of what each role may do in an account (published in docs/guides/accounts-and-keys.md). */
export const ROLE_PERMISSIONS: Readonly<Record<Role, ReadonlySet<Permission>>> = {
  viewer: new Set(VIEWER),
  member: new Set(MEMBER),
  admin: new Set(ADMIN),
  owner: new Set([...ADMIN, "accounts.owner"])
}

/** Who is calling. */
export type Principal =
  | {
      readonly _tag: "User"
      readonly userId: string
      /** The dashboard cookie or an OAuth access token (`POST /auth/token`). */
      readonly via: "cookie" | "token"
      /** The account an access token was minted for: the default active account. */
      readonly tokenAccountId: string | null
    }
  | {
      readonly _tag: "ApiKey"
      readonly keyId: string
      /** The account the key is bound to. */
      readonly accountId: string
      /** The user a user key acts as; null for a service account's key. */
      readonly userId: string | null
      readonly serviceAccountId: string | null
      /** `null`: full access. */
      readonly scopes: ReadonlyArray<Scope> | null
      readonly mode: "live" | "test"
      /** The role the key acts with: its user's membership role or its service account's. */
      readonly role: Role
    }
  | {
      /** A library host or the service itself acting on an account (no request behind it). */
      readonly _tag: "System"
    }
  /**
   * An assistant's runtime, by the short-lived token of the session it runs in
   * (`asrt_...`): it may call only the routes written for it, on its own
   * assistant.
   */
  | {
      readonly _tag: "Assistant"
      readonly assistantId: string
      readonly accountId: string
      readonly sessionId: string
    }

/** A principal on the wire (to a session's actor, which may run on another node). */
export const PrincipalSchema = Schema.Union([
  Schema.Struct({
    _tag: Schema.Literal("User"),
    userId: Schema.String,
    via: Schema.Literals(["cookie", "token"]),
    tokenAccountId: Schema.NullOr(Schema.String)
  }),
  Schema.Struct({
    _tag: Schema.Literal("ApiKey"),
    keyId: Schema.String,
    accountId: Schema.String,
    userId: Schema.NullOr(Schema.String),
    serviceAccountId: Schema.NullOr(Schema.String),
    scopes: Schema.NullOr(Schema.Array(Scope)),
    mode: Schema.Literals(["live", "test"]),
    role: Role
  }),
  Schema.Struct({ _tag: Schema.Literal("System") }),
  Schema.Struct({
    _tag: Schema.Literal("Assistant"),
    assistantId: Schema.String,
    accountId: Schema.String,
    sessionId: Schema.String
  })
])

export const OwnerSchema = Schema.Struct({
  accountId: Schema.String,
  principal: PrincipalSchema,
  role: Role
})

/** Who the audit trail names for a principal. */
export interface Actor {
  readonly type: "user" | "api_key" | "service_account" | "system" | "assistant"
  readonly id: string | null
  /** The person behind it, when there is one. */
  readonly userId: string | null
}

/** The active account of a request and who acts on it: what every handler scopes by. */
export interface Owner {
  readonly accountId: string
  readonly principal: Principal
  /** The caller's role in the account. */
  readonly role: Role
}

export const actorOf = (principal: Principal): Actor => {
  switch (principal._tag) {
    case "User":
      return { type: "user", id: principal.userId, userId: principal.userId }
    case "ApiKey":
      return principal.serviceAccountId !== null
        ? { type: "service_account", id: principal.serviceAccountId, userId: null }
        : { type: "api_key", id: principal.keyId, userId: principal.userId }
    case "System":
      return { type: "system", id: null, userId: null }
    case "Assistant":
      return { type: "assistant", id: principal.assistantId, userId: null }
  }
}

/** Who a per-principal limit counts: the key, or the user (cookie, token), or the system. */
export const principalKey = (principal: Principal): string => {
  switch (principal._tag) {
    case "User":
      return `user:${principal.userId}`
    case "ApiKey":
      return `key:${principal.keyId}`
    case "System":
      return "system"
    case "Assistant":
      return `assistant:${principal.assistantId}`
  }
}

/** The key behind a request, if it came with one. */
export const apiKeyIdOf = (owner: Owner): string | null =>
  owner.principal._tag === "ApiKey" ? owner.principal.keyId : null

/** False for a test-mode key: it labels its sessions (`live: false`), charged as a live key's are. */
export const isLive = (owner: Owner): boolean =>
  owner.principal._tag !== "ApiKey" || owner.principal.mode === "live"

/** The user behind a request (null for a service account's key and the system). */
export const userIdOf = (owner: Owner): string | null =>
  owner.principal._tag === "System" || owner.principal._tag === "Assistant" ? null : owner.principal.userId

/**
 * Whether the caller may do what a permission covers: the role must hold it,
 * and a scoped key must have been given it explicitly.
 */
export const permits = (owner: Pick<Owner, "principal" | "role">, permission: Permission): boolean => {
  // A runtime holds no permission: the routes open to it say so by their credentials alone.
  if (owner.principal._tag === "Assistant") return false
  if (!ROLE_PERMISSIONS[owner.role].has(permission)) return false
  const principal = owner.principal
  if (principal._tag !== "ApiKey" || principal.scopes === null) return true
  return (principal.scopes as ReadonlyArray<string>).includes(permission)
}

/** An owner for library hosts and maintenance: the account itself, all permissions. */
export const systemOwner = (accountId: string): Owner => ({
  accountId,
  role: "owner",
  principal: { _tag: "System" }
})
