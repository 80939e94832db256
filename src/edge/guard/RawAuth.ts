import { Effect, Option } from "effect"
import type { HttpServerRequest } from "effect/http"
import type { Access } from "../../features/policy/Access.ts"
import { SESSION_COOKIE } from "../../features/policy/AuthMiddleware.ts"
import { ACCOUNT_HEADER, Authenticator } from "./Authenticator.ts"
import { bearerToken, connectToken } from "./Credentials.ts"
import { Forbidden, Unauthorized } from "../../kernel/Errors.ts"

const originOf = (url: string) => {
  try {
    return new URL(url).origin
  } catch {
    return undefined
  }
}

/**
 * Whether a request carrying the dashboard cookie came from another site. A
 * WebSocket upgrade is a GET, so the CSRF guard (state changes only) does not
 * see it, yet a page of another site could open one with the visitor's
 * cookie (cross-site WebSocket hijacking): its `Origin` must be this service.
 */
export const foreignOrigin = (
  request: HttpServerRequest.HttpServerRequest,
  publicOrigin: string | undefined
) => {
  const site = request.headers["sec-fetch-site"]
  if (site !== undefined && site !== "same-origin" && site !== "none") return true
  const origin = request.headers.origin
  if (origin === undefined) return false
  const host = request.headers.host
  const own = new Set([publicOrigin])
  if (host !== undefined) {
    own.add(originOf(`http://${host}`))
    own.add(originOf(`https://${host}`))
  }
  return !own.has(origin)
}

/**
 * The active account: `X-Service-Account`, or `?account=` for a client that
 * cannot set headers (a browser's WebSocket, the dashboard's terminal).
 */
const accountOf = (request: HttpServerRequest.HttpServerRequest, fromQuery: boolean) => {
  const header = request.headers[ACCOUNT_HEADER]
  if (header !== undefined || !fromQuery) return header
  const query = request.url.indexOf("?")
  if (query < 0) return undefined
  return new URLSearchParams(request.url.slice(query + 1)).get("account") ?? undefined
}

/**
 * The caller of a route outside the HttpApi (a WebSocket upgrade, the
 * gateway), checked as `Authorize` checks the others: an API key or access
 * token (`Authorization: Bearer`, or `?token=` for clients that cannot set
 * headers), else the dashboard cookie from this service's own pages; then
 * the active account (`X-Service-Account` or `?account=`) and the route's access.
 */
export const authorizeRaw = (
  request: HttpServerRequest.HttpServerRequest,
  access: Access,
  publicOrigin: string | undefined,
  /** `?account=` names the account (not for the gateway, whose query is the program's). */
  accountInQuery = false
) =>
  Effect.flatMap(Effect.service(Authenticator), (authenticator) =>
    authorizeRawWith(authenticator, request, access, publicOrigin, accountInQuery)
  )

/** `authorizeRaw` with the authenticator at hand (a route that holds it since its start). */
export const authorizeRawWith = (
  authenticator: Authenticator["Service"],
  request: HttpServerRequest.HttpServerRequest,
  /** `undefined`: only the caller and its account (`callerRaw`). */
  access: Access | undefined,
  publicOrigin: string | undefined,
  accountInQuery = false
) =>
  Effect.gen(function* () {
    const token = connectToken(request)
    let principal
    if (token !== "") principal = yield* authenticator.bearer(token)
    else {
      const cookie = request.cookies[SESSION_COOKIE]
      if (cookie === undefined) return yield* new Unauthorized()
      if (foreignOrigin(request, publicOrigin)) return yield* new Forbidden()
      principal = yield* authenticator.cookie(cookie)
    }
    if (Option.isNone(principal)) return yield* new Unauthorized()
    const account = accountOf(request, accountInQuery)
    // Unchecked, for a route whose `Policy.admit` checks the access and audits a refusal.
    return access === undefined
      ? yield* authenticator.resolve(principal.value, account)
      : yield* authenticator.authorize(principal.value, access, account)
  })

/**
 * The caller of a raw route as `authorizeRaw` finds it (credential, account),
 * its access not checked: for a route that goes through `Policy.admit`,
 * which checks it and records a refusal under the route's audit action.
 */
export const callerRaw = (
  request: HttpServerRequest.HttpServerRequest,
  publicOrigin: string | undefined,
  accountInQuery = false
) =>
  Effect.flatMap(Effect.service(Authenticator), (authenticator) =>
    authorizeRawWith(authenticator, request, undefined, publicOrigin, accountInQuery)
  )

/**
 * The caller by its `Authorization: Bearer` alone, then the active account
 * (`X-Service-Account`) and the route's access: for a per-session gateway
 * origin, whose query and cookies are the program's, not the service's.
 */
export const authorizeBearer = (request: HttpServerRequest.HttpServerRequest, access: Access) =>
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const token = bearerToken(request)
    if (token === undefined) return yield* new Unauthorized()
    const principal = yield* authenticator.bearer(token)
    if (Option.isNone(principal)) return yield* new Unauthorized()
    return yield* authenticator.authorize(principal.value, access, request.headers[ACCOUNT_HEADER])
  })

export { originOf as urlOrigin }
