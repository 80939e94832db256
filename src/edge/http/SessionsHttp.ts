import { Effect } from "effect"
import { HttpEffect, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { CAPACITY_RETRY_AFTER_SECONDS } from "../../platform/cluster/Placement.ts"
import { InvalidRequest } from "../../kernel/Errors.ts"
import { Sessions } from "../../features/sessions/Sessions.ts"

const owner = Effect.service(CurrentOwner)

export const SessionsHttp = HttpApiBuilder.group(
  Api,
  "sessions",
  Effect.fn(function* (handlers) {
    const sessions = yield* Sessions
    return handlers
      .handle("create", ({ payload, headers }) =>
        Effect.gen(function* () {
          const created = yield* sessions
            .createIdempotent(yield* owner, payload ?? {}, { idempotencyKey: headers["idempotency-key"] })
            .pipe(
              Effect.tapErrorTag("CapacityExhausted", (refused) =>
                HttpEffect.appendPreResponseHandler((_request, response) =>
                  Effect.succeed(
                    HttpServerResponse.setHeader(
                      response,
                      "retry-after",
                      String(refused.retryAfterSeconds ?? CAPACITY_RETRY_AFTER_SECONDS)
                    )
                  )
                )
              )
            )
          if (created.replayed) {
            yield* HttpEffect.appendPreResponseHandler((_request, response) =>
              Effect.succeed(HttpServerResponse.setHeader(response, "idempotent-replayed", "true"))
            )
          }
          return created.session
        })
      )
      .handle("list", ({ query }) => Effect.flatMap(owner, (o) => sessions.list(o, query)))
      .handle("get", ({ params }) => Effect.flatMap(owner, (o) => sessions.get(o, params.id)))
      .handle("delete", ({ params }) => Effect.flatMap(owner, (o) => sessions.close(o, params.id)))
      .handle("bulkTerminate", ({ payload }) =>
        Effect.flatMap(owner, (o) => sessions.bulkTerminate(o, payload))
      )
      .handle("screenshot", ({ params }) => Effect.flatMap(owner, (o) => sessions.screenshot(o, params.id)))
      .handle("computer", ({ params, payload }) =>
        Effect.flatMap(owner, (o) => sessions.computer(o, params.id, payload))
      )
      .handle("previewToken", ({ params, payload }) =>
        payload !== null && Object.keys(payload).length > 0
          ? Effect.fail(new InvalidRequest())
          : Effect.flatMap(owner, (o) => sessions.previewToken(o, params.id))
      )
      .handle("resize", ({ params, payload }) =>
        Effect.flatMap(owner, (o) => Effect.as(sessions.resize(o, params.id, payload), {}))
      )
  })
)
