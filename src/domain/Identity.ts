import { Schema } from "effect"

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
  role: Schema.String,
  personal: Schema.Boolean
})
export type AccountInfo = typeof AccountInfo.Type

/** An API key as lists show it: never the secret. */
export const ApiKey = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  prefix: Schema.String,
  created_at: Timestamp,
  last_used_at: NullableTimestamp,
  revoked_at: NullableTimestamp
})
export type ApiKey = typeof ApiKey.Type

/** The one response that carries the full secret. */
export const CreatedApiKey = Schema.Struct({
  ...ApiKey.fields,
  secret: Schema.String
})
export type CreatedApiKey = typeof CreatedApiKey.Type

/** Who a Bearer key speaks for. */
export interface Principal {
  readonly accountId: string
  readonly apiKeyId: string
  readonly userId: string
}
