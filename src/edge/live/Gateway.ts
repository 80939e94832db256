import { Clock, Effect, Option } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { RAW } from "../guard/RawRoutes.ts"
import { CurrentOrigin } from "../../features/policy/AuthMiddleware.ts"
import { originOf } from "../guard/Authenticator.ts"
import { PublicUrls } from "../../platform/config/Config.ts"
import { systemOwner } from "../../kernel/Owner.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import { authorizeRaw, urlOrigin } from "../guard/RawAuth.ts"
import { INTERNAL_PREFIX, SessionDoor } from "./SessionDoor.ts"
import { proxy } from "./GatewayProxy.ts"
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
  })
)
