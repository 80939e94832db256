import { Cause, Effect } from "effect"
import { HttpRouter, HttpServerError, HttpServerResponse } from "effect/http"
import { InternalError, RouteNotFound, UnsupportedMediaType } from "../../kernel/Errors.ts"
import { errorBody, type HttpError } from "../../kernel/ApiError.ts"

/**
 * An error as a raw response with the API's error body, for paths outside the
 * HttpApi error schemas (the CDP relay, the router's own 404/415/500). The
 * status and code come from the error.
 */
export const errorResponse = (error: HttpError, headers?: Record<string, string>) =>
  HttpServerResponse.jsonUnsafe(errorBody(error), { status: error.status, headers: headers ?? {} })

/**
 * Everything that would otherwise leave the router without the API's error body:
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
          return Effect.succeed(errorResponse(new RouteNotFound()))
        }
        return Effect.logError("http.unhandled", { cause }).pipe(
          Effect.as(errorResponse(new InternalError()))
        )
      }),
      Effect.map((response) =>
        response.status === 415 && !String(response.headers["content-type"]).includes("json")
          ? errorResponse(new UnsupportedMediaType())
          : response
      )
    ),
  { global: true }
)
