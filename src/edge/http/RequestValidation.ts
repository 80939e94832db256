import { HttpApiMiddleware } from "effect/http-api"
import { InvalidField, InvalidRequest } from "../../kernel/Errors.ts"

/**
 * Turns request decoding failures into the API's 400s: `invalid_field` naming
 * the first offending field, `invalid_request` when the body as a whole is
 * wrong. Declared on the whole API so every endpoint documents both.
 */
export class RequestValidation extends HttpApiMiddleware.Service<RequestValidation>()(
  "rbs/http/RequestValidation",
  {
    error: [InvalidRequest.Wire, InvalidField.Wire]
  }
) {}
