import { Effect, Option } from "effect"
import type { HttpServerRequest } from "effect/http"
import type { Access } from "../../features/policy/Access.ts"
import { ACCOUNT_HEADER, type Authenticator } from "../guard/Authenticator.ts"
import { connectToken } from "../guard/Credentials.ts"
import { InvalidRequest, Unauthorized } from "../../kernel/Errors.ts"
import { isWebSocketUpgrade } from "./Ends.ts"

/**
 * The caller of a CDP route (the relay, a page's relay, DevTools discovery),
 * taken as the CDP connect always has: an API key or access token as
 * `Authorization: Bearer` or `?token=` (CDP clients are programs: no
 * cookie), then the active account (`X-Service-Account`) and the route's
 * access. A WebSocket route (`upgrade`) refuses a plain request (400) before
 * its access is checked.
 */
export const cdpCaller = (
  authenticator: Authenticator["Service"],
  request: HttpServerRequest.HttpServerRequest,
  access: Access,
  upgrade: boolean
) =>
  Effect.gen(function* () {
    const principal = yield* authenticator.bearer(connectToken(request))
    if (Option.isNone(principal)) return yield* new Unauthorized()
    if (upgrade && !isWebSocketUpgrade(request)) return yield* new InvalidRequest()
    return yield* authenticator.authorize(principal.value, access, request.headers[ACCOUNT_HEADER])
  })
