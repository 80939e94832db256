import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { SshKeys } from "../../features/identity/SshKeys.ts"

export const SshKeysHttp = HttpApiBuilder.group(
  Api,
  "sshKeys",
  Effect.fn(function* (handlers) {
    const sshKeys = yield* SshKeys
    return handlers
      .handle("create", ({ payload }) =>
        Effect.flatMap(CurrentOwner, (owner) => Effect.map(sshKeys.add(owner, payload), (key) => ({ key })))
      )
      .handle("list", () =>
        Effect.flatMap(CurrentOwner, (owner) => Effect.map(sshKeys.list(owner), (keys) => ({ keys })))
      )
      .handle("delete", ({ params }) =>
        Effect.flatMap(CurrentOwner, (owner) => sshKeys.remove(owner, params.id))
      )
  })
)
