import { Schema, SchemaTransformation } from "effect"
import { HttpApiSchema } from "effect/http-api"

/**
 * The spec's error body, `{ error: { code, message } }`.
 */
export const ErrorBody = <const Code extends string>(code: Code) =>
  Schema.Struct({
    error: Schema.Struct({
      code: Schema.Literal(code),
      message: Schema.String
    })
  })

/**
 * Gives an error class its wire form: the status it answers with and the body
 * `{ error: { code, message } }`. Handlers fail with the class; the server
 * encodes it to this body, and a typed client decodes the body back into the
 * class.
 */
export const wire = <Self extends { readonly message: string }, const Code extends string>(
  self: Schema.Codec<Self, any> & { new (props: any): Self },
  options: {
    readonly status: number
    readonly code: Code
    readonly decode: (message: string) => Self
    readonly description?: string
  }
) =>
  ErrorBody(options.code).pipe(
    Schema.decodeTo(
      Schema.toType(self),
      SchemaTransformation.transform({
        decode: (body) => options.decode(body.error.message),
        encode: (error: Self) => ({ error: { code: options.code, message: error.message } })
      })
    ),
    HttpApiSchema.status(options.status),
    Schema.annotate({ description: options.description ?? `${options.status} ${options.code}` })
  )
