import { Effect, Layer } from "effect"
import { HttpEffect, HttpRouter, HttpServerResponse } from "effect/http"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { RateLimitHeaders, RouteRateLimit } from "../../features/limits/LimitsMiddleware.ts"
import {
  RateLimitReport,
  type RateLimitReportCell,
  rateLimitHeaders
} from "../../features/limits/RateLimitReport.ts"
import { limitOf, Policy } from "../guard/Policy.ts"

export const RateLimitHeadersLive = Layer.succeed(
  RateLimitHeaders,
  RateLimitHeaders.of((httpEffect) =>
    Effect.gen(function* () {
      const cell: RateLimitReportCell = { current: undefined }
      // A pre-response handler sees the final response, including an error encoded after this returns.
      yield* HttpEffect.appendPreResponseHandler((_request, response) =>
        Effect.succeed(
          cell.current === undefined
            ? response
            : HttpServerResponse.setHeaders(response, rateLimitHeaders(cell.current))
        )
      )
      return yield* Effect.provideService(httpEffect, RateLimitReport, cell)
    })
  )
)

export const RouteRateLimitLive = Layer.effect(
  RouteRateLimit,
  Effect.gen(function* () {
    const policy = yield* Policy
    return RouteRateLimit.of((httpEffect, { endpoint }) => {
      const limit = limitOf(endpoint.annotations)
      if (limit === undefined) return httpEffect
      return Effect.gen(function* () {
        const owner = yield* CurrentOwner
        const sessionId = limit.per === "session" ? (yield* HttpRouter.params).id : undefined
        yield* policy.spend(owner, limit, sessionId)
        return yield* httpEffect
      })
    })
  })
)

export const layer = Layer.mergeAll(RateLimitHeadersLive, RouteRateLimitLive)
