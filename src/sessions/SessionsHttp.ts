import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { CurrentPrincipal } from "../auth/AuthMiddleware.ts"
import { InvalidRequest } from "../domain/Errors.ts"
import { ownerOf } from "./SessionAdmission.ts"
import { Sessions } from "./Sessions.ts"

const owner = Effect.map(CurrentPrincipal, ownerOf)

export const SessionsHttp = HttpApiBuilder.group(
  Api,
  "sessions",
  Effect.fn(function* (handlers) {
    const sessions = yield* Sessions
    return handlers
      .handle("create", ({ payload }) => Effect.flatMap(owner, (o) => sessions.create(o, payload ?? {})))
      .handle("list", ({ query }) => Effect.flatMap(owner, (o) => sessions.list(o, query)))
      .handle("get", ({ params }) => Effect.flatMap(owner, (o) => sessions.get(o, params.id)))
      .handle("delete", ({ params }) => Effect.flatMap(owner, (o) => sessions.close(o, params.id)))
      .handle("screenshot", ({ params }) => Effect.flatMap(owner, (o) => sessions.screenshot(o, params.id)))
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
