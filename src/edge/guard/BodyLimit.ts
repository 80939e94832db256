import { ByteSize, Effect } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServerRequest } from "effect/http"
import { PayloadTooLarge } from "../../kernel/Errors.ts"
import { MAX_BODY_BYTES } from "../../kernel/Validation.ts"
import { errorResponse } from "./ErrorResponses.ts"

/** Whether `value` is, or was caused by, the platform's refusal to read past `MaxBodySize`. */
export const overflowed = (value: unknown, depth = 0): boolean => {
  if (depth > 4 || typeof value !== "object" || value === null) return false
  const record = value as { readonly _tag?: unknown; readonly cause?: unknown; readonly reason?: unknown }
  return (
    record._tag === "MaxBytesError" ||
    overflowed(record.reason, depth + 1) ||
    overflowed(record.cause, depth + 1)
  )
}

/**
 * No request body past `MAX_BODY_BYTES` is held by the service: one that says
 * it is larger (`Content-Length`) is 413 `payload_too_large` before any of it
 * is read, and reading one sent without a length stops at the limit: a JSON
 * route answers the same 413 (`InputGuard` reads its body first), a raw one
 * refuses the body as it would a malformed one. Covers every route and
 * WebSocket upgrades' bodies.
 */
export const layer = HttpRouter.middleware(
  Effect.succeed((httpEffect) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const length = Number(request.headers["content-length"] ?? 0)
      if (length > MAX_BODY_BYTES) return Effect.succeed(errorResponse(new PayloadTooLarge()))
      return Effect.provideService(
        httpEffect,
        HttpIncomingMessage.MaxBodySize,
        ByteSize.bytes(MAX_BODY_BYTES)
      )
    })
  ),
  { global: true }
)
