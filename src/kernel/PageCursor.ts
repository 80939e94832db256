import { Schema } from "effect"

/**
 * The opaque cursor of a newest-first list ordered by `(created_at, id)`:
 * base64url of `[created_at, id]` (webhook deliveries, jobs).
 */
export const PageCursor = Schema.StringFromBase64Url.pipe(
  Schema.decodeTo(Schema.fromJsonString(Schema.Tuple([Schema.DateFromString, Schema.String])))
)
