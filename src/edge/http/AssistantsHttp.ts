import { Effect } from "effect"
import { HttpEffect, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { Sessions } from "../../features/sessions/Sessions.ts"
import { AssistantIntents } from "../../features/assistants/AssistantIntents.ts"
import { Assistants } from "../../features/assistants/Assistants.ts"
import { AssistantUsage } from "../../features/assistants/AssistantUsage.ts"
import { AssistantVault } from "../../features/assistants/AssistantVault.ts"

const owner = Effect.service(CurrentOwner)

/** The state's `ETag`, set on the answer. */
const etag = (version: number) =>
  HttpEffect.appendPreResponseHandler((_request, response) =>
    Effect.succeed(HttpServerResponse.setHeader(response, "etag", `"${version}"`))
  )

export const AssistantsHttp = HttpApiBuilder.group(
  Api,
  "assistants",
  Effect.fn(function* (handlers) {
    const assistants = yield* Assistants
    const sessions = yield* Sessions
    const vault = yield* AssistantVault
    const usage = yield* AssistantUsage
    const stateInfo = (
      id: string,
      state: { state: Record<string, unknown>; version: number; updated_at: Date }
    ) =>
      Effect.as(etag(state.version), {
        object: "assistant_runtime_state" as const,
        assistant_id: id,
        state: state.state,
        version: state.version,
        updated_at: state.updated_at
      })
    return handlers
      .handle("create", ({ payload }) => Effect.flatMap(owner, (o) => assistants.create(o, payload)))
      .handle("list", () =>
        Effect.flatMap(owner, (o) =>
          Effect.map(assistants.list(o), (data) => ({ object: "list" as const, data }))
        )
      )
      .handle("get", ({ params }) => Effect.flatMap(owner, (o) => assistants.get(o, params.id)))
      .handle("patch", ({ params, payload }) =>
        Effect.flatMap(owner, (o) => assistants.patch(o, params.id, payload))
      )
      .handle("pause", ({ params }) =>
        Effect.gen(function* () {
          const o = yield* owner
          const paused = yield* assistants.pause(o, params.id)
          // The runtime's session ends with the pause (its token already stopped with the row).
          if (paused.endSession !== null) yield* sessions.close(o, paused.endSession).pipe(Effect.ignore)
          return paused.assistant
        })
      )
      .handle("resume", ({ params }) => Effect.flatMap(owner, (o) => assistants.resume(o, params.id)))
      .handle("putCredential", ({ payload }) =>
        Effect.flatMap(owner, (o) =>
          Effect.map(vault.putCredential(o, payload), (info) => ({
            object: "assistant_credential" as const,
            ...info
          }))
        )
      )
      .handle("resolveCredential", ({ payload }) =>
        Effect.flatMap(owner, (o) =>
          Effect.map(vault.resolveCredential(o, payload), (resolved) => ({
            object: "assistant_credential_value" as const,
            ...resolved
          }))
        )
      )
      .handle("bindChannel", ({ params, payload }) =>
        Effect.flatMap(owner, (o) => vault.bindChannel(o, params.id, payload))
      )
      .handle("unbindChannel", ({ params }) =>
        Effect.flatMap(owner, (o) => vault.unbindChannel(o, params.id, params.bid))
      )
      .handle("resolveChannel", ({ payload }) =>
        Effect.flatMap(owner, (o) =>
          Effect.map(vault.resolveChannel(o, payload), (channel) => ({
            ...channel,
            object: "assistant_channel_resolved" as const
          }))
        )
      )
      .handle("recordUsage", ({ params, payload }) =>
        Effect.flatMap(owner, (o) => usage.record(o, params.id, payload))
      )
      .handle("listUsage", ({ params, query }) =>
        Effect.flatMap(owner, (o) =>
          Effect.map(usage.list(o, params.id, query), (page) => ({ object: "list" as const, ...page }))
        )
      )
      .handle("getState", ({ params }) =>
        Effect.flatMap(owner, (o) =>
          Effect.flatMap(assistants.getState(o, params.id), (s) => stateInfo(params.id, s))
        )
      )
      .handle("putState", ({ params, payload, headers }) =>
        Effect.flatMap(owner, (o) =>
          Effect.flatMap(assistants.putState(o, params.id, payload, { ifMatch: headers["if-match"] }), (s) =>
            stateInfo(params.id, s)
          )
        )
      )
  })
)

export const AssistantIntentsHttp = HttpApiBuilder.group(
  Api,
  "assistantIntents",
  Effect.fn(function* (handlers) {
    const intents = yield* AssistantIntents
    return handlers
      .handle("propose", ({ params, payload }) =>
        Effect.flatMap(owner, (o) => intents.propose(o, params.id, payload))
      )
      .handle("list", ({ params, query }) =>
        Effect.flatMap(owner, (o) =>
          Effect.map(intents.list(o, params.id, query), (page) => ({ object: "list" as const, ...page }))
        )
      )
      .handle("get", ({ params }) => Effect.flatMap(owner, (o) => intents.get(o, params.id, params.rid)))
      .handle("approve", ({ params, payload }) =>
        Effect.flatMap(owner, (o) => intents.decide(o, params.id, params.rid, "approved", payload ?? {}))
      )
      .handle("deny", ({ params, payload }) =>
        Effect.flatMap(owner, (o) => intents.decide(o, params.id, params.rid, "denied", payload ?? {}))
      )
  })
)
