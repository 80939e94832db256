import { Effect, Layer, Option, Schema } from "effect"
import * as Path from "node:path"
import { DatabaseConfig, NodeConfig } from "../config/Config.ts"
import * as DataDir from "../files/DataDir.ts"
import * as OwnerFile from "./OwnerFile.ts"
import { runAs } from "./PostgresProcess.ts"

export class ServiceLockError extends Schema.TaggedError<ServiceLockError>()("ServiceLockError", {
  message: Schema.String
}) {}

/**
 * One service per data dir: its browsers' profiles, and the sessions its
 * start-up reconciles, are that service's alone. A second service started on
 * the same `DATA_DIR` stops here, before it could close the first one's
 * sessions or kill its browsers. (`rbs` commands other than `serve` take no
 * such lock.) The service that holds it makes the data dir its own alone
 * (`DataDir.secure`), the embedded Postgres's user let through when it runs
 * one as root.
 */
export const layer = Layer.effectDiscard(
  Effect.gen(function* () {
    const config = yield* NodeConfig
    const file = Path.join(config.dataDir, "service.pid")
    yield* Effect.promise(() => DataDir.makePrivate(config.dataDir))
    const claimed = yield* Effect.promise(() => OwnerFile.claim(file))
    if (claimed._tag === "Taken") {
      return yield* new ServiceLockError({
        message: `Another service (pid ${claimed.owner}) is running from ${config.dataDir}; stop it, or give this one its own DATA_DIR`
      })
    }
    yield* Effect.addFinalizer(() => Effect.promise(() => OwnerFile.release(file)))
    const embedded = Option.isNone((yield* DatabaseConfig).databaseUrl)
    const postgres = embedded ? yield* runAs.pipe(Effect.orDie) : {}
    yield* Effect.promise(() => DataDir.secure(config.dataDir, postgres.gid))
  })
).pipe(Layer.orDie)
