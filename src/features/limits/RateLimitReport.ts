import { Context } from "effect"

/** What a limit said about the current request: rendered as the `X-RateLimit-*` headers. */
export interface RateLimitState {
  readonly limit: number
  readonly remaining: number
  /** Seconds until the budget is full again. */
  readonly resetSeconds: number
  /** Whose budget it is (`principal`, `account`, or `service`: everyone's, as all sign-ups are). */
  readonly scope: "principal" | "account" | "service"
  /** Present when the request was refused: the `Retry-After` header. */
  readonly retryAfterSeconds?: number | undefined
}

export interface RateLimitReportCell {
  current: RateLimitState | undefined
}

/**
 * Where a limit records its verdict for the current request. The HTTP layer
 * gives each request a fresh cell and turns it into headers; outside HTTP
 * (library callers) the verdicts go to a cell nobody reads.
 */
export const RateLimitReport = Context.Reference<RateLimitReportCell>("rbs/limits/RateLimitReport", {
  defaultValue: () => ({ current: undefined })
})

/** The `X-RateLimit-*` headers (and `Retry-After` for a refusal) of a verdict. */
export const rateLimitHeaders = (state: RateLimitState): Record<string, string> => {
  const headers: Record<string, string> = {
    "x-ratelimit-limit": String(state.limit),
    "x-ratelimit-remaining": String(Math.max(0, Math.floor(state.remaining))),
    "x-ratelimit-reset": String(Math.max(0, Math.ceil(state.resetSeconds))),
    "x-ratelimit-scope": state.scope
  }
  if (state.retryAfterSeconds !== undefined)
    headers["retry-after"] = String(Math.max(1, Math.ceil(state.retryAfterSeconds)))
  return headers
}
