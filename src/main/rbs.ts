import { Effect } from "effect"
import * as Cli from "../edge/cli/Cli.ts"
import * as ServiceMain from "./ServiceMain.ts"

// `rbs`: the operator's command line, whose `serve` is the service as `npm start` runs it (its
// modules loaded only for `serve`: the other commands start without them). A command that failed
// on the user's mistake set the exit code itself.
Cli.run(
  Effect.flatMap(
    Effect.promise(() => import("./App.ts")),
    (App) => ServiceMain.serve(App.layerFromEnv)
  )
).pipe(
  ServiceMain.runMain({
    teardown: (exit, onExit) =>
      onExit(
        process.exitCode !== undefined && process.exitCode !== 0
          ? Number(process.exitCode)
          : ServiceMain.exitCode(exit)
      )
  })
)
