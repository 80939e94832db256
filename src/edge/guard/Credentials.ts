import type { HttpServerRequest } from "effect/http"

/** The token of an `Authorization: Bearer <token>` header, if the request has one. */
export const bearerToken = (request: HttpServerRequest.HttpServerRequest): string | undefined => {
  const header = request.headers.authorization
  return header === undefined ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1]
}

/**
 * The API key of a WebSocket connect: the Bearer header, or `?token=` for
 * clients that cannot set headers (browsers' own WebSocket, some CDP tools).
 */
export const connectToken = (request: HttpServerRequest.HttpServerRequest): string =>
  bearerToken(request) ?? new URL(request.url, "http://relay").searchParams.get("token") ?? ""
