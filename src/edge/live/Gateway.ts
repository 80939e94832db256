import { Clock, Effect, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { RAW } from "../guard/RawRoutes.ts"
import { CurrentOrigin } from "../../features/policy/AuthMiddleware.ts"
import { originOf } from "../guard/Authenticator.ts"
import { PublicUrls } from "../../platform/config/Config.ts"
import { type Owner, systemOwner } from "../../kernel/Owner.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import { authorizeBearer, authorizeRaw, urlOrigin } from "../guard/RawAuth.ts"
import { Authenticator } from "../guard/Authenticator.ts"
import { Forbidden, RouteNotFound } from "../../kernel/Errors.ts"
import { access } from "../../features/policy/Access.ts"
import { INTERNAL_PREFIX, SessionDoor } from "./SessionDoor.ts"
import { proxy, proxyFor } from "./GatewayProxy.ts"
import { gatewayHostOf, type GatewayHost } from "./GatewayHost.ts"
import { GatewayTokens, LINK_COOKIE, LINK_PARAM } from "./GatewayTokens.ts"

export { LINK_COOKIE, LINK_PARAM } from "./GatewayTokens.ts"

/**
 * What a gateway request needs: `sessions.read` (the route's declared access) to read, GET or
 * HEAD; `sessions.write` for any other method, and for a WebSocket, which carries anything both ways.
 */
const reads = (request: HttpServerRequest.HttpServerRequest) =>
  (request.method === "GET" || request.method === "HEAD") && request.headers.upgrade === undefined
const accessFor = (request: HttpServerRequest.HttpServerRequest) =>
  reads(request) ? RAW.gateway.access : access("sessions.write", RAW.gateway.access.credentials)

/** A signed link opened in a browser's GET: its token, to become a cookie, for this long. */
interface OpenedLink {
  readonly token: string
  readonly maxAge: number
}

/**
 * How a gateway request to session `id` is let in: its signed link (the
 * query's, else the cookie's) when valid for that session, else `otherwise`
 * (the caller's credentials). `path`: its path and query without the link's
 * token; `link`: set when the link came in the query of a browser's GET.
 */
const admit = <E, R>(
  links: GatewayTokens["Service"],
  request: HttpServerRequest.HttpServerRequest,
  id: string,
  otherwise: Effect.Effect<Owner, E, R>
) =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const url = new URL(request.url, "http://gateway")
    const fromLink = url.searchParams.get(LINK_PARAM)
    url.searchParams.delete(LINK_PARAM)
    const token = fromLink ?? request.cookies[LINK_COOKIE]
    const verified = token === undefined ? Option.none() : links.verify(token, new Date(now))
    const valid = Option.filter(verified, (claims) => claims.sessionId === id)
    // A link writes only if its minter could.
    if (Option.isSome(valid) && !valid.value.write && !reads(request)) return yield* new Forbidden()
    const owner = Option.isSome(valid) ? systemOwner(valid.value.accountId) : yield* otherwise
    const opened =
      fromLink !== null &&
      Option.isSome(valid) &&
      request.headers.upgrade === undefined &&
      request.method === "GET"
    const link: OpenedLink | undefined = opened
      ? {
          token: fromLink,
          maxAge: Math.max(1, Math.floor((Option.getOrThrow(valid).expiresAt.getTime() - now) / 1000))
        }
      : undefined
    return { owner, path: `${url.pathname}${url.search}`, link }
  })

/** 303 to `path` without the link's token, which becomes a cookie (`attributes`: where it goes). */
const linkRedirect = (path: string, link: OpenedLink, attributes: string) =>
  HttpServerResponse.empty({
    status: 303,
    headers: {
      location: path,
      "set-cookie": `${LINK_COOKIE}=${link.token}; ${attributes}; Max-Age=${link.maxAge}; HttpOnly; SameSite=Lax`
    }
  })

/**
 * `{PUBLIC_URL}/s/{id}/{port}/...`: HTTP and WebSockets to a port a program
 * in the sandbox listens on (a dev server started with exec in the
 * background). Authenticated by key (`Authorization: Bearer` or
 * `?token=`), the dashboard cookie, or a signed link (`?rbs_token=`, from
 * `POST /v1/sessions/{id}/gateway-token`), which becomes a cookie scoped to
 * the session's gateway path so the page's own requests carry it. Reached
 * through the session door.
 */
export const layer = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const door = yield* SessionDoor
    const links = yield* GatewayTokens
    const config = yield* PublicUrls
    const publicOrigin = urlOrigin(config.publicUrl)

    const handler = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const params = yield* HttpRouter.params
        const id = params.id ?? ""
        const { owner, path, link } = yield* admit(
          links,
          request,
          id,
          authorizeRaw(request, accessFor(request), publicOrigin)
        )
        // A link opened in a browser: its token becomes the path's cookie and leaves the URL.
        if (link !== undefined) return linkRedirect(path, link, `Path=/s/${id}/`)
        return yield* door.serve(
          request,
          { owner, id, kind: "gateway", params, path, allHeaders: true },
          proxy
        )
      }).pipe(
        Effect.provideService(CurrentOrigin, originOf(request)),
        Effect.catch((error) => Effect.succeed(errorResponse(error)))
      )

    yield* router.add("*", "/s/:id/:port/*", (request) => {
      // `/s/{id}/{port}` has its slash added, so the program's relative links resolve under it.
      const url = new URL(request.url, "http://gateway")
      return /^\/s\/[^/]+\/[^/]+$/.test(url.pathname)
        ? Effect.succeed(
            HttpServerResponse.empty({ status: 308, headers: { location: `${url.pathname}/${url.search}` } })
          )
        : handler(request)
    })
    yield* router.add("*", `${INTERNAL_PREFIX}/s/:id/:port/*`, door.internal("gateway", proxy))
    // A per-session origin's requests, relayed from the node that took them (`layerOrigins`).
    yield* router.add("*", `${INTERNAL_PREFIX}/o/:id/:port/*`, door.internal("gateway", onOrigin))
  })
)

const onOrigin = proxyFor("origin")

/**
 * The per-session origins (`GATEWAY_DOMAIN`, see `GatewayHost`): every
 * request whose `Host` is under the domain goes to a sandbox's port, never to
 * a route of the service, with the same door, node hop, metering and audit
 * as the path form. Authenticated by `Authorization: Bearer` (never passed
 * on) or a signed link (`?rbs_token=`), which the first GET turns into a
 * cookie of that host alone and takes out of the URL; the program's query
 * and cookies are its own. A host under the domain that names no session's
 * port is 404.
 */
export const layerOrigins = HttpRouter.middleware(
  Effect.gen(function* () {
    const door = yield* SessionDoor
    const links = yield* GatewayTokens
    const authenticator = yield* Authenticator
    const config = yield* PublicUrls
    const domain = config.gatewayDomain
    const secure = config.publicUrl.startsWith("https://") ? "; Secure" : ""

    const serve = (request: HttpServerRequest.HttpServerRequest, target: GatewayHost) =>
      Effect.gen(function* () {
        const { id, port } = target
        const { owner, path, link } = yield* admit(
          links,
          request,
          id,
          authorizeBearer(request, accessFor(request))
        )
        if (link !== undefined) return linkRedirect(path, link, `Path=/${secure}`)
        return yield* door.serve(
          request,
          {
            owner,
            id,
            kind: "gateway",
            params: { id, port: String(port) },
            path: `/o/${id}/${port}${path}`,
            allHeaders: true
          },
          onOrigin
        )
      }).pipe(
        Effect.provideService(CurrentOrigin, originOf(request)),
        Effect.provideService(Authenticator, authenticator),
        Effect.catch((error) => Effect.succeed(errorResponse(error)))
      )

    return (httpEffect) =>
      domain === undefined
        ? httpEffect
        : Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
            const host = request.headers.host?.toLowerCase().replace(/:\d+$/, "")
            if (host === undefined || (host !== domain && !host.endsWith(`.${domain}`))) return httpEffect
            const target = gatewayHostOf(host, domain)
            return target === undefined
              ? Effect.succeed(errorResponse(new RouteNotFound()))
              : serve(request, target)
          })
  }),
  { global: true }
)
