import { Effect, Schema, SchemaIssue } from "effect"
import { InvalidField, InvalidRequest } from "./Errors.ts"

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

const fieldOf = (segment: PropertyKey | { readonly key: PropertyKey }) =>
  String(typeof segment === "object" ? segment.key : segment)

/**
 * The spec's 400 for a decoding failure: `invalid_field` naming the first
 * field with an issue, `invalid_request` when the input as a whole is wrong.
 */
export const toRequestError = (issue: SchemaIssue.Issue): InvalidField | InvalidRequest => {
  const path = formatIssues(issue).issues.find((each) => (each.path?.length ?? 0) > 0)?.path
  return path === undefined || path.length === 0
    ? new InvalidRequest()
    : new InvalidField({ field: fieldOf(path[0]!) })
}

/**
 * Decodes a use case's input with the same schema the HTTP contract uses, so
 * a library caller gets the same 400s as an HTTP client.
 */
export const decodeInput =
  <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) =>
  (input: unknown): Effect.Effect<S["Type"], InvalidField | InvalidRequest> =>
    Schema.decodeUnknownEffect(schema)(input).pipe(Effect.mapError((error) => toRequestError(error.issue)))
