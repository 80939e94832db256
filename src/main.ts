import { NodeRuntime } from "@effect/platform-node"
import { Cause, Exit, Layer } from "effect"
import * as App from "./App.ts"

// A stop by SIGTERM/SIGINT interrupts the service; once its finalizers have run
// (browsers killed, sessions recorded, Postgres stopped) that is a clean exit.
Layer.launch(App.layerFromEnv).pipe(
  NodeRuntime.runMain({
    teardown: (exit, onExit) =>
      onExit(Exit.isSuccess(exit) || (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)) ? 0 : 1)
  })
)
