import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "./Api.ts"
import { CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { Extensions } from "../../features/extensions/Extensions.ts"
import { InvalidRequest } from "../../kernel/Errors.ts"
import { ExtensionInfo } from "../../kernel/Extension.ts"
import * as Uploads from "../../platform/files/Uploads.ts"

export const ExtensionsHttp = HttpApiBuilder.group(
  Api,
  "extensions",
  Effect.fn(function* (handlers) {
    const extensions = yield* Extensions
    return handlers
      .handleRaw("create", ({ request }) =>
        Effect.gen(function* () {
          const owner = yield* CurrentOwner
          // The zip held whole (16 MiB at most, refused past that before more is read), then checked.
          const { file } = yield* Uploads.receive(request)
          if (file === undefined) return yield* new InvalidRequest()
          const zip = Buffer.concat(file.chunks, file.size)
          const created = yield* extensions.create(owner, zip)
          return HttpServerResponse.jsonUnsafe(Schema.encodeSync(ExtensionInfo)(created), { status: 201 })
        })
      )
      .handle("list", () =>
        Effect.flatMap(CurrentOwner, (owner) =>
          Effect.map(extensions.list(owner), (data) => ({ object: "list" as const, data }))
        )
      )
      .handle("get", ({ params }) =>
        Effect.flatMap(CurrentOwner, (owner) => extensions.get(owner, params.id))
      )
      .handle("delete", ({ params }) =>
        Effect.flatMap(CurrentOwner, (owner) => extensions.remove(owner, params.id))
      )
  })
)
