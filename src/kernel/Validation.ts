import { Effect, Schema, SchemaIssue } from "effect"
import { InvalidField, InvalidRequest } from "./Errors.ts"

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

const fieldOf = (segment: PropertyKey | { readonly key: PropertyKey }) =>
  String(typeof segment === "object" ? segment.key : segment)

/**
 * The API's 400 for a decoding failure: `invalid_field` naming the first
 * field with an issue, `invalid_request` when the input as a whole is wrong.
 */
export const toRequestError = (issue: SchemaIssue.Issue): InvalidField | InvalidRequest => {
  const path = formatIssues(issue).issues.find((each) => (each.path?.length ?? 0) > 0)?.path
  return path === undefined || path.length === 0
    ? new InvalidRequest()
    : new InvalidField({ field: fieldOf(path[0]!) })
}

type JsonPath = ReadonlyArray<string | number>

/** Text Postgres cannot hold as it is: U+0000, or a lone surrogate (not Unicode at all). */
const unstorable = (text: string) => text.includes("\u0000") || !text.isWellFormed()

/** `text` as Postgres can store it: U+0000 and lone surrogates become U+FFFD (for what is only recorded). */
export const storableText = (text: string) =>
  unstorable(text) ? text.replaceAll("\u0000", "\uFFFD").toWellFormed() : text

/**
 * The most a request body may hold: a 16 MiB upload or stdin, with the
 * base64 and JSON or multipart around it. Larger is 413 `payload_too_large`.
 */
export const MAX_BODY_BYTES = 32 * 1024 * 1024

/** How deep a JSON body may nest (arrays and objects): deeper is 400 `invalid_request`, before it is parsed. */
export const MAX_JSON_DEPTH = 64

/** Whether JSON `text` nests deeper than `limit`: a scan of its brackets outside strings, no parse. */
export const jsonDeeperThan = (text: string, limit: number) => {
  let depth = 0
  let inString = false
  for (let index = 0; index < text.length; index++) {
    const char = text.charCodeAt(index)
    if (inString) {
      if (char === 92)
        index++ // a backslash: the next character is escaped
      else if (char === 34) inString = false
    } else if (char === 34) inString = true
    else if (char === 91 || char === 123) {
      if (++depth > limit) return true
    } else if (char === 93 || char === 125) depth--
  }
  return false
}

/**
 * Where the first text Postgres cannot store sits in a decoded JSON value (a
 * string, or an object key), or `undefined`. Postgres refuses U+0000 in any
 * text, so input holding it is refused before it can reach a query.
 */
export const unstorableTextPath = (value: unknown, path: JsonPath = []): JsonPath | undefined => {
  if (typeof value === "string") return unstorable(value) ? path : undefined
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const found = unstorableTextPath(value[index], [...path, index])
      if (found !== undefined) return found
    }
    return undefined
  }
  if (typeof value === "object" && value !== null) {
    for (const [key, inner] of Object.entries(value)) {
      if (unstorable(key)) return [...path, key]
      const found = unstorableTextPath(inner, [...path, key])
      if (found !== undefined) return found
    }
  }
  return undefined
}

/** The 400 for input holding such text: `invalid_field` naming the top field, or `invalid_request`. */
export const unstorableTextError = (path: JsonPath): InvalidField | InvalidRequest =>
  path.length === 0 ? new InvalidRequest() : new InvalidField({ field: String(path[0]) })

/**
 * Decodes input no schema has checked yet (a body a raw route reads itself,
 * a job's input against its kind, a command made of a stored config, a
 * library host's own caller's) with a schema of the contract, into the
 * API's 400s: text Postgres cannot hold first, then the schema's first
 * issue (a field the schema does not have is one, named). Use cases take what it answers, typed, and decode nothing again.
 */
const STRICT = { onExcessProperty: "error" } as const

export const decodeInput =
  <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) =>
  (input: unknown): Effect.Effect<S["Type"], InvalidField | InvalidRequest> => {
    const nul = unstorableTextPath(input)
    if (nul !== undefined) return Effect.fail(unstorableTextError(nul))
    return Schema.decodeUnknownEffect(schema)(input, STRICT).pipe(
      Effect.mapError((error) => toRequestError(error.issue))
    )
  }
