import { Clock, Effect, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { RAW } from "../guard/RawRoutes.ts"
import { CurrentOrigin } from "../../features/policy/AuthMiddleware.ts"
import { originOf } from "../guard/Authenticator.ts"
import { PublicUrls } from "../../platform/config/Config.ts"
import { systemOwner } from "../../kernel/Owner.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import { authorizeBearer, authorizeRaw, urlOrigin } from "../guard/RawAuth.ts"
import { Authenticator } from "../guard/Authenticator.ts"
import { RouteNotFound } from "../../kernel/Errors.ts"
import { INTERNAL_PREFIX, SessionDoor } from "./SessionDoor.ts"
import { proxy, proxyFor } from "./GatewayProxy.ts"
import { gatewayHostOf, type GatewayHost } from "./GatewayHost.ts"
import { GatewayTokens, LINK_COOKIE, LINK_PARAM } from "./GatewayTokens.ts"

export { LINK_COOKIE, LINK_PARAM } from "./GatewayTokens.ts"

const ACCESS = RAW.gateway.access

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
        const now = new Date(yield* Clock.currentTimeMillis)
        const query = new URL(request.url, "http://gateway").searchParams
        const linkToken = query.get(LINK_PARAM) ?? request.cookies[LINK_COOKIE]
        const link = linkToken === undefined ? Option.none() : links.verify(linkToken, now)
        const owner =
          Option.isSome(link) && link.value.sessionId === id
            ? systemOwner(link.value.accountId)
            : yield* authorizeRaw(request, ACCESS, publicOrigin)
        const fromLink = query.get(LINK_PARAM)
        // A link opened in a browser: its token becomes the path's cookie and leaves the URL.
        if (
          fromLink !== null &&
          Option.isSome(link) &&
          request.headers.upgrade === undefined &&
          request.method === "GET"
        ) {
          const clean = new URL(request.url, "http://gateway")
          clean.searchParams.delete(LINK_PARAM)
          const maxAge = Math.max(1, Math.floor((link.value.expiresAt.getTime() - now.getTime()) / 1000))
          return HttpServerResponse.empty({
            status: 303,
            headers: {
              location: `${clean.pathname}${clean.search}`,
              "set-cookie": `${LINK_COOKIE}=${fromLink}; Path=/s/${id}/; Max-Age=${maxAge}; HttpOnly; SameSite=Lax`
            }
          })
        }
        const clean = new URL(request.url, "http://gateway")
        clean.searchParams.delete(LINK_PARAM)
        return yield* door.serve(
          request,
          { owner, id, kind: "gateway", params, path: `${clean.pathname}${clean.search}`, allHeaders: true },
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
        const now = new Date(yield* Clock.currentTimeMillis)
        const url = new URL(request.url, "http://gateway")
        const fromLink = url.searchParams.get(LINK_PARAM)
        const linkToken = fromLink ?? request.cookies[LINK_COOKIE]
        const link = linkToken === undefined ? Option.none() : links.verify(linkToken, now)
        const owner =
          Option.isSome(link) && link.value.sessionId === id
            ? systemOwner(link.value.accountId)
            : yield* authorizeBearer(request, ACCESS)
        url.searchParams.delete(LINK_PARAM)
        const clean = `${url.pathname}${url.search}`
        if (
          fromLink !== null &&
          Option.isSome(link) &&
          request.headers.upgrade === undefined &&
          request.method === "GET"
        ) {
          const maxAge = Math.max(1, Math.floor((link.value.expiresAt.getTime() - now.getTime()) / 1000))
          return HttpServerResponse.empty({
            status: 303,
            headers: {
              location: clean,
              "set-cookie": `${LINK_COOKIE}=${fromLink}; Path=/; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure}`
            }
          })
        }
        return yield* door.serve(
          request,
          {
            owner,
            id,
            kind: "gateway",
            params: { id, port: String(port) },
            path: `/o/${id}/${port}${clean}`,
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
