import { Schema } from "effect"

const uuid = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

export const SessionId = Schema.String.pipe(
  Schema.check(Schema.isPattern(new RegExp(`^sess_${uuid}$`))),
  Schema.brand("SessionId")
)
export type SessionId = typeof SessionId.Type

export const isSessionId = Schema.is(SessionId)

export const UserId = Schema.String.pipe(Schema.brand("UserId"))
export type UserId = typeof UserId.Type

export const AccountId = Schema.String.pipe(Schema.brand("AccountId"))
export type AccountId = typeof AccountId.Type

export const ApiKeyId = Schema.String.pipe(Schema.brand("ApiKeyId"))
export type ApiKeyId = typeof ApiKeyId.Type

export const isUuid = (value: string) => new RegExp(`^${uuid}$`).test(value)
