import { Effect } from "effect"
import { HttpRouter, HttpServerRequest } from "effect/http"
import { SESSION_COOKIE } from "../../features/policy/AuthMiddleware.ts"
import { PublicUrls } from "../../platform/config/Config.ts"
import { Forbidden } from "../../kernel/Errors.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"])

/** Routes that set or end the dashboard login: a forged one logs the victim in or out. */
const LOGIN_ROUTES = new Set(["/auth/login", "/auth/register", "/auth/logout"])

const originOf = (url: string) => {
  try {
    return new URL(url).origin
  } catch {
    return undefined
  }
}

/**
 * Whether a state-changing request came from another site and would act
 * with the browser's ambient credentials: the dashboard cookie (and no
 * Authorization header, which a forging page cannot add), or a login route.
 * Browsers say where a request comes from: `Sec-Fetch-Site` (anything but
 * `same-origin` or `none`, which is typed in or bookmarked) and `Origin`
 * (this service's `PUBLIC_URL` or the address the request was sent to).
 * Clients that send neither header (curl, SDKs) are not browsers and carry no
 * ambient credentials, so the README's curl quick start keeps working.
 * SameSite=Lax alone would still let a sibling subdomain post.
 */
export const isCrossSite = (
  request: HttpServerRequest.HttpServerRequest,
  publicOrigin: string | undefined
) => {
  if (SAFE_METHODS.has(request.method)) return false
  const path = request.url.split("?")[0]!
  const ambient =
    LOGIN_ROUTES.has(path) ||
    (request.cookies[SESSION_COOKIE] !== undefined && request.headers.authorization === undefined)
  if (!ambient) return false
  const site = request.headers["sec-fetch-site"]
  if (site !== undefined && site !== "same-origin" && site !== "none") return true
  const origin = request.headers.origin
  if (origin === undefined) return false
  const host = request.headers.host
  const own = new Set([publicOrigin, host === undefined ? undefined : originOf(`http://${host}`)])
  if (host !== undefined) own.add(originOf(`https://${host}`))
  return !own.has(origin)
}

/**
 * Refuses cross-site state changes made with the dashboard cookie (CSRF):
 * 403 `forbidden` before any route runs. Covers every route, HttpApi and raw
 * alike, including the local checkout's pay button.
 */
export const layer = HttpRouter.middleware(
  Effect.gen(function* () {
    const publicOrigin = originOf((yield* PublicUrls).publicUrl)
    return (httpEffect) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        isCrossSite(request, publicOrigin) ? Effect.succeed(errorResponse(new Forbidden())) : httpEffect
      )
  }),
  { global: true }
)
