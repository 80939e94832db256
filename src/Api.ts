import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { AuthApi, KeysApi } from "./auth/AuthApi.ts"
import { BillingApi, CheckoutPagesApi } from "./billing/BillingApi.ts"
import { ServiceUnavailable } from "./domain/Errors.ts"
import { UsageApi } from "./usage/UsageApi.ts"
import { addRawRoutes } from "./http/RawRoutesDoc.ts"
import { RequestValidation } from "./http/RequestValidation.ts"
import { RateLimitHeaders } from "./limits/LimitsMiddleware.ts"
import { SessionsApi } from "./sessions/SessionsApi.ts"

export class SystemApi extends HttpApiGroup.make("system")
  .add(
    HttpApiEndpoint.get("healthz", "/healthz", {
      success: Schema.Struct({ status: Schema.Literal("ok") })
    }).annotate(OpenApi.Description, "The process is up."),
    HttpApiEndpoint.get("readyz", "/readyz", {
      success: Schema.Struct({
        status: Schema.Literal("ready"),
        database: Schema.Literal("ok"),
        browser_pool: Schema.Struct({ idle: Schema.Number, target: Schema.Number })
      }),
      error: ServiceUnavailable.Wire
    }).annotate(OpenApi.Description, "The database answers and the browser pool has launched a browser.")
  )
  .annotate(OpenApi.Title, "System") {}

/** The whole HTTP contract: one definition gives the server, the typed client and OpenAPI. */
export class Api extends HttpApi.make("remote-browser-service")
  .add(SystemApi)
  .add(AuthApi)
  .add(KeysApi)
  .add(SessionsApi)
  .add(UsageApi)
  .add(BillingApi)
  .add(CheckoutPagesApi)
  .middleware(RequestValidation)
  .middleware(RateLimitHeaders)
  .annotateMerge(
    OpenApi.annotations({
      title: "Remote Browser Service",
      version: "1.0.0",
      description:
        "Short-lived Chromium sessions driven over the Chrome DevTools Protocol, metered egress and a prepaid balance. Public routes take `Authorization: Bearer <API key>`; key management and top-ups take the `service_session` cookie. Every error has the body `{ error: { code, message } }`.",
      transform: addRawRoutes
    })
  ) {}
