import { Effect, Option, Result } from "effect"
import { HttpRouter, HttpServerRequest, type HttpServerResponse } from "effect/http"
import type { HttpApiEndpoint } from "effect/http-api"
import { errorOfWire } from "../../kernel/ApiError.ts"
import { InvalidField, InvalidRequest, PayloadTooLarge, RouteNotFound } from "../../kernel/Errors.ts"
import {
  jsonDeeperThan,
  MAX_JSON_DEPTH,
  unstorableTextError,
  unstorableTextPath
} from "../../kernel/Validation.ts"
import { overflowed } from "./BodyLimit.ts"
import { errorResponse } from "./ErrorResponses.ts"

const NUL = "\u0000"

/** The route's own not-found error (the 404 among its declared errors). */
export const notFoundOf = (endpoint: HttpApiEndpoint.Top) => {
  for (const schema of endpoint.error) {
    const error = errorOfWire(schema)
    if (error?.status === 404) return error
  }
  return new RouteNotFound()
}

/**
 * A path id holding U+0000 names nothing: the route's 404. Checked before the
 * caller's access, so every credential gets the same answer and no refusal is
 * recorded (the audit trail's target) with text Postgres cannot store.
 */
export const refuseUnnamable = (endpoint: HttpApiEndpoint.Top) =>
  Effect.map(Effect.serviceOption(HttpRouter.RouteContext), (route) =>
    Option.isSome(route) && Object.values(route.value.params).some((value) => value?.includes(NUL))
      ? Option.some(errorResponse(notFoundOf(endpoint)))
      : Option.none()
  )

/**
 * Input no route can use, answered before any of the route's queries:
 * Postgres refuses U+0000 in any text, so a path id holding it names nothing
 * (404 with the route's not-found code) and a query value or JSON field
 * holding it (or a lone surrogate, which is no Unicode text at all) cannot be
 * stored (400 `invalid_field` naming it), and a JSON body nested deeper than
 * `MAX_JSON_DEPTH` is 400 `invalid_request`. Runs once the
 * caller is authenticated and authorized (`Authorize`), or for routes that
 * take no credentials, in `RequestValidation`.
 */
export const refuseImpossibleInput = (
  endpoint: HttpApiEndpoint.Top
): Effect.Effect<
  Option.Option<HttpServerResponse.HttpServerResponse>,
  never,
  HttpServerRequest.HttpServerRequest
> =>
  Effect.gen(function* () {
    const unnamable = yield* refuseUnnamable(endpoint)
    if (Option.isSome(unnamable)) return unnamable
    const request = yield* HttpServerRequest.HttpServerRequest
    const query = request.url.indexOf("?")
    if (query >= 0) {
      for (const [name, value] of new URLSearchParams(request.url.slice(query + 1))) {
        if (name.includes(NUL) || value.includes(NUL)) {
          return Option.some(errorResponse(new InvalidField({ field: name.replaceAll(NUL, "") })))
        }
      }
    }
    if (!String(request.headers["content-type"] ?? "").includes("json")) return Option.none()
    const read = yield* Effect.result(request.text)
    // A body sent without its length, read up to the limit (BodyLimit) and no further.
    if (Result.isFailure(read) && overflowed(read.failure))
      return Option.some(errorResponse(new PayloadTooLarge()))
    const text = Result.getOrElse(read, () => "")
    // Nesting no schema here takes, refused before anything walks it.
    if (jsonDeeperThan(text, MAX_JSON_DEPTH)) return Option.some(errorResponse(new InvalidRequest()))
    // JSON carries U+0000 and lone surrogates only escaped: parse only bodies that might hold them.
    if (!text.includes("\\u0000") && !/\\u[dD][89a-fA-F]/.test(text)) return Option.none()
    const parsed = yield* Effect.try(() => JSON.parse(text) as unknown).pipe(Effect.option)
    const path = Option.flatMap(parsed, (body) => Option.fromUndefinedOr(unstorableTextPath(body)))
    return Option.map(path, (at) => errorResponse(unstorableTextError(at)))
  })
