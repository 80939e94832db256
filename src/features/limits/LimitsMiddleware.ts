import { Context } from "effect"
import { HttpApiMiddleware } from "effect/http-api"
import type { CurrentOwner } from "../policy/AuthMiddleware.ts"
import { RateLimited } from "../../kernel/Errors.ts"
import type { RateLimitName } from "./RateLimits.ts"

/**
 * Gives every request a fresh `RateLimitReport` and renders what the limits
 * recorded in it as `X-RateLimit-*` headers (and `Retry-After` on a 429), on
 * the success and the error response alike. Declared on the whole API.
 */
export class RateLimitHeaders extends HttpApiMiddleware.Service<RateLimitHeaders>()(
  "rbs/limits/RateLimitHeaders"
) {}

/** Endpoint annotation: the per-session rate limit a route spends (its `:id` is the session). */
export class PerSessionRateLimit extends Context.Service<PerSessionRateLimit, RateLimitName>()(
  "rbs/limits/PerSessionRateLimit"
) {}

/** Endpoint annotation: a rate limit of the caller's account as a whole (webhook mutations). */
export class PerAccountRateLimit extends Context.Service<PerAccountRateLimit, RateLimitName>()(
  "rbs/limits/PerAccountRateLimit"
) {}

/** Endpoint annotation: a rate limit of the caller (its key, user or service account) in its account. */
export class PerPrincipalRateLimit extends Context.Service<PerPrincipalRateLimit, RateLimitName>()(
  "rbs/limits/PerPrincipalRateLimit"
) {}

/**
 * Spends the `PerSessionRateLimit` (or `PerAccountRateLimit`) an endpoint is annotated with, keyed by
 * the caller's account and the session in the path. Endpoints without the
 * annotation pass through.
 */
export class RouteRateLimit extends HttpApiMiddleware.Service<RouteRateLimit, { requires: CurrentOwner }>()(
  "rbs/limits/RouteRateLimit",
  { error: RateLimited.Wire }
) {}
