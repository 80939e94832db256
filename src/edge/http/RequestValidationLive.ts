import { Effect, Layer, Option } from "effect"
import type { HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
import type { unhandled } from "effect/Types"
import { Authorize } from "../../features/policy/AuthMiddleware.ts"
import type { InvalidField, InvalidRequest } from "../../kernel/Errors.ts"
import { toRequestError } from "../../kernel/Validation.ts"
import { refuseImpossibleInput } from "../guard/InputGuard.ts"
import { RequestValidation } from "./RequestValidation.ts"

/**
 * Request decoding failures: the first issue with a path names the field
 * (`invalid_field`); a body that is not JSON, or not an object at all, is
 * `invalid_request`. Routes that take no credentials also have their input
 * checked here for what no route can use (`refuseImpossibleInput`; the others
 * have it checked by `Authorize`, once the caller is known).
 */
export const RequestValidationLive = Layer.succeed(RequestValidation, (httpEffect, { endpoint }) =>
  Effect.gen(function* () {
    if (!endpoint.middlewares.has(Authorize)) {
      const refused = yield* refuseImpossibleInput(endpoint)
      if (Option.isSome(refused)) return refused.value
    }
    return yield* Effect.catch(
      httpEffect,
      (
        error
      ): Effect.Effect<HttpServerResponse.HttpServerResponse, unhandled | InvalidField | InvalidRequest> => {
        const unchanged = Effect.fail(error)
        // A body or response header the server could not encode is its own fault: left as it is.
        if (!HttpApiError.HttpApiSchemaError.is(error)) return unchanged
        if (error.kind === "Body" || error.kind === "ResponseHeaders") return unchanged
        return Effect.fail(toRequestError(error.cause.issue))
      }
    )
  })
)
