import { Effect, Layer, Schema } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { NodeConfig } from "../config/Config.ts"
import * as OwnerFile from "./OwnerFile.ts"

export class ServiceLockError extends Schema.TaggedError<ServiceLockError>()("ServiceLockError", {
  message: Schema.String
}) {}

/**
 * One service per data dir: its browsers' profiles, and the sessions its
 * start-up reconciles, are that service's alone. A second service started on
 * the same `DATA_DIR` stops here, before it could close the first one's
 * sessions or kill its browsers. (`rbs` commands other than `serve` take no
 * such lock.)
 */
export const layer = Layer.effectDiscard(
  Effect.gen(function* () {
    const config = yield* NodeConfig
    const file = Path.join(config.dataDir, "service.pid")
    yield* Effect.promise(() => Fs.mkdir(config.dataDir, { recursive: true }))
    const claimed = yield* Effect.promise(() => OwnerFile.claim(file))
    if (claimed._tag === "Taken") {
      return yield* new ServiceLockError({
        message: `Another service (pid ${claimed.owner}) is running from ${config.dataDir}; stop it, or give this one its own DATA_DIR`
      })
    }
    yield* Effect.addFinalizer(() => Effect.promise(() => OwnerFile.release(file)))
  })
).pipe(Layer.orDie)
