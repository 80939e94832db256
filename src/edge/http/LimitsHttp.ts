import { Context, Effect, Layer } from "effect"
import { HttpEffect, HttpRouter, HttpServerResponse } from "effect/http"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { principalKey } from "../../kernel/Owner.ts"
import {
  PerAccountRateLimit,
  PerPrincipalRateLimit,
  PerSessionRateLimit,
  RateLimitHeaders,
  RouteRateLimit
} from "../../features/limits/LimitsMiddleware.ts"
import {
  RateLimitReport,
  type RateLimitReportCell,
  rateLimitHeaders
} from "../../features/limits/RateLimitReport.ts"
import { RateLimits } from "../../features/limits/RateLimits.ts"

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
    const limits = yield* RateLimits
    return RouteRateLimit.of((httpEffect, { endpoint }) =>
      Effect.gen(function* () {
        const perPrincipal = Context.getOption(endpoint.annotations, PerPrincipalRateLimit)
        if (perPrincipal._tag === "Some") {
          const owner = yield* CurrentOwner
          yield* limits.consume(perPrincipal.value, `${owner.accountId}:${principalKey(owner.principal)}`)
          return yield* httpEffect
        }
        const perAccount = Context.getOption(endpoint.annotations, PerAccountRateLimit)
        if (perAccount._tag === "Some") {
          yield* limits.consume(perAccount.value, (yield* CurrentOwner).accountId)
          return yield* httpEffect
        }
        const limit = Context.getOption(endpoint.annotations, PerSessionRateLimit)
        if (limit._tag === "None") return yield* httpEffect
        const owner = yield* CurrentOwner
        const { id } = yield* HttpRouter.params
        yield* limits.consume(limit.value, `${owner.accountId}:${id ?? ""}`)
        return yield* httpEffect
      })
    )
  })
)

export const layer = Layer.mergeAll(RateLimitHeadersLive, RouteRateLimitLive)
