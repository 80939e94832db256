import { Schema } from "effect"
import { Role, Scope } from "./Owner.ts"

const Timestamp = Schema.DateFromString
const NullableTimestamp = Schema.NullOr(Schema.DateFromString)

export const User = Schema.Struct({
  id: Schema.String,
  email: Schema.String,
  created_at: Timestamp
})
export type User = typeof User.Type

export const AccountInfo = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  kind: Schema.Literals(["personal", "organization"]),
  created_at: Timestamp,
  /** The caller's role in the account. */
  role: Role,
  personal: Schema.Boolean
})
export type AccountInfo = typeof AccountInfo.Type

export const AccountMemberInfo = Schema.Struct({
  user_id: Schema.String,
  email: Schema.String,
  name: Schema.optionalKey(Schema.NullOr(Schema.String)),
  joined_at: Timestamp,
  role: Role,
  owner: Schema.Boolean
})
export type AccountMemberInfo = typeof AccountMemberInfo.Type

export const KeyMode = Schema.Literals(["live", "test"])
export type KeyMode = typeof KeyMode.Type

/** An API key as lists show it: never the secret. */
export const ApiKey = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  prefix: Schema.String,
  created_at: Timestamp,
  last_used_at: NullableTimestamp,
  /** When the key stops (stopped) authenticating: its revocation, or the end of a rotation's grace. */
  revoked_at: NullableTimestamp,
  /** `null`: full access. */
  scopes: Schema.NullOr(Schema.Array(Scope)),
  mode: KeyMode,
  /** The service account the key acts as; null for a user's key. */
  service_account_id: Schema.NullOr(Schema.String)
})
export type ApiKey = typeof ApiKey.Type

/** The one response that carries the full secret. */
export const CreatedApiKey = Schema.Struct({
  ...ApiKey.fields,
  secret: Schema.String
})
export type CreatedApiKey = typeof CreatedApiKey.Type

export const CreateKeyRequest = Schema.Struct({
  name: Schema.String,
  scopes: Schema.optionalKey(Schema.NullOr(Schema.Array(Schema.String))),
  mode: Schema.optionalKey(Schema.NullOr(Schema.String))
})
export type CreateKeyRequest = typeof CreateKeyRequest.Type

export const RotateKeyRequest = Schema.Struct({
  grace_days: Schema.optionalKey(Schema.Number)
})

export const ServiceAccountInfo = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  role: Role,
  created_at: Timestamp,
  created_by: Schema.NullOr(Schema.String)
})
export type ServiceAccountInfo = typeof ServiceAccountInfo.Type

/** An SSH public key of a user's, as the API shows it. */
export const SshKeyInfo = Schema.Struct({
  id: Schema.String,
  name: Schema.NullOr(Schema.String),
  created_at: Schema.DateFromString,
  key_fingerprint: Schema.String,
  key_type: Schema.String,
  public_key: Schema.String,
  last_used_at: Schema.NullOr(Schema.DateFromString)
})
export type SshKeyInfo = typeof SshKeyInfo.Type
