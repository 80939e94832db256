import { Cause, Effect, Layer } from "effect"
import { HttpRouter, HttpServerError, HttpServerResponse } from "effect/http"
import { HttpApiMiddleware } from "effect/http-api"
import { SchemaIssue } from "effect"
import {
  InternalError,
  InvalidField,
  InvalidRequest,
  RouteNotFound,
  UnsupportedMediaType
} from "../domain/Errors.ts"
import { RequestValidation } from "./RequestValidation.ts"

/** The spec's error body as a raw response, for paths outside the HttpApi error schemas. */
export const errorResponse = (
  status: number,
  error: { readonly message: string },
  code: string,
  headers?: Record<string, string>
) =>
  HttpServerResponse.jsonUnsafe(
    { error: { code, message: error.message } },
    { status, headers: headers ?? {} }
  )

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

const fieldOf = (segment: PropertyKey | { readonly key: PropertyKey }) =>
  String(typeof segment === "object" ? segment.key : segment)

/**
 * Request decoding failures: the first issue with a path names the field
 * (`invalid_field`); a body that is not JSON, or not an object at all, is
 * `invalid_request`.
 */
export const RequestValidationLive = HttpApiMiddleware.layerSchemaErrorTransform(
  RequestValidation,
  (error) => {
    if (error.kind === "Body" || error.kind === "ResponseHeaders") return Effect.fail(error)
    const issues = formatIssues(error.cause.issue).issues
    const path = issues.find((issue) => (issue.path?.length ?? 0) > 0)?.path
    return Effect.fail(
      path === undefined || path.length === 0
        ? new InvalidRequest()
        : new InvalidField({ field: fieldOf(path[0]!) })
    )
  }
)

/**
 * Everything that would otherwise leave the router without the spec's body:
 * unknown routes (404), unsupported content types (415), and defects (500,
 * logged; the client never sees internals).
 */
export const layerErrorBodies = HttpRouter.middleware(
  (httpEffect) =>
    httpEffect.pipe(
      Effect.catchCause((cause) => {
        if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
        const failure = Cause.findErrorOption(cause)
        if (
          failure._tag === "Some" &&
          HttpServerError.isHttpServerError(failure.value) &&
          failure.value.reason._tag === "RouteNotFound"
        ) {
          return Effect.succeed(errorResponse(404, new RouteNotFound(), "not_found"))
        }
        return Effect.logError("http.unhandled", { cause }).pipe(
          Effect.as(errorResponse(500, new InternalError(), "internal_error"))
        )
      }),
      Effect.map((response) =>
        response.status === 415 && !String(response.headers["content-type"]).includes("json")
          ? errorResponse(415, new UnsupportedMediaType(), "unsupported_media_type")
          : response
      )
    ),
  { global: true }
)

export const layer = Layer.mergeAll(RequestValidationLive, layerErrorBodies)
