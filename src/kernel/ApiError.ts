import { Schema, SchemaAST, SchemaTransformation } from "effect"
import { HttpApiSchema } from "effect/http-api"

/**
 * An error the API answers with: its HTTP status and the API's `code` live on
 * the error itself, so every way of rendering it (HttpApi schemas, raw routes
 * such as the CDP relay) agrees without restating them.
 */
export interface HttpError {
  readonly status: number
  readonly code: string
  readonly message: string
}

/**
 * The API's error body, `{ error: { code, message } }`.
 */
export const ErrorBody = <const Code extends string>(code: Code) =>
  Schema.Struct({
    error: Schema.Struct({
      code: Schema.Literal(code),
      message: Schema.String
    })
  })

/** The API's error body for an error instance. */
export const errorBody = (error: HttpError) => ({ error: { code: error.code, message: error.message } })

/** The annotation that carries a wire schema's error (see `errorOfWire`). */
const ERROR_ANNOTATION = "rbs/httpError"

/**
 * The error a wire schema made by `wire` renders (an instance with its status
 * and code), so middleware can answer an endpoint's own declared error. Read
 * from an annotation, which the HttpApi's own transformations keep.
 */
export const errorOfWire = (schema: Schema.Top): HttpError | undefined =>
  SchemaAST.resolveAt<HttpError>(ERROR_ANNOTATION)(schema.ast)

/**
 * Gives an error class its wire form: the status it answers with and the body
 * `{ error: { code, message } }`, both read from the error. Handlers fail with
 * the class; the server encodes it to this body, and a typed client decodes
 * the body back into the class with `decode`.
 */
export const wire = <Self extends HttpError>(
  self: Schema.Codec<Self, any> & { new (props: any): Self },
  decode: (message: string) => Self,
  description?: string
) => {
  const sample = decode("")
  return ErrorBody(sample.code as Self["code"]).pipe(
    Schema.decodeTo(
      Schema.toType(self),
      SchemaTransformation.transform({
        decode: (body) => decode(body.error.message),
        encode: (error: Self) => ({ error: { code: error.code as Self["code"], message: error.message } })
      })
    ),
    HttpApiSchema.status(sample.status),
    Schema.annotate({
      description: description ?? `${sample.status} ${sample.code}`,
      [ERROR_ANNOTATION]: sample
    })
  )
}
