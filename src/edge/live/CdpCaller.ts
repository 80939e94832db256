import { Effect, Option } from "effect"
import type { HttpServerRequest } from "effect/http"
import type { Access } from "../../features/policy/Access.ts"
import { ACCOUNT_HEADER, type Authenticator } from "../guard/Authenticator.ts"
import { connectToken } from "../guard/Credentials.ts"
import { InvalidRequest, Unauthorized } from "../../kernel/Errors.ts"
import type { ConnectTokens } from "./ConnectTokens.ts"
import { isWebSocketUpgrade } from "./Ends.ts"

/**
 * The caller of a CDP route (the relay, a page's relay, DevTools discovery),
 * taken as the CDP connect always has: an API key or access token as
 * `Authorization: Bearer` or `?token=` (CDP clients are programs: no
 * cookie), then the active account (`X-Service-Account`) and the route's
 * access; or a connect token of session `sessionId` (what discovery's URLs
 * carry), which acts as its minter now stands, in the account it was minted in. A
 * WebSocket route (`upgrade`) refuses a plain request (400) before its
 * access is checked.
 */
export const cdpCaller = (
  authenticator: Authenticator["Service"],
  connectTokens: ConnectTokens["Service"],
  request: HttpServerRequest.HttpServerRequest,
  sessionId: string,
  access: Access,
  upgrade: boolean
) =>
  Effect.gen(function* () {
    const token = connectToken(request)
    const claims = connectTokens.verify(token, sessionId, new Date())
    const principal = Option.isSome(claims)
      ? yield* authenticator.again(claims.value.principal, claims.value.issuedAt)
      : yield* authenticator.bearer(token)
    if (Option.isNone(principal)) return yield* new Unauthorized()
    if (upgrade && !isWebSocketUpgrade(request)) return yield* new InvalidRequest()
    const selector = Option.isSome(claims) ? claims.value.accountId : request.headers[ACCOUNT_HEADER]
    return yield* authenticator.authorize(principal.value, access, selector)
  })
