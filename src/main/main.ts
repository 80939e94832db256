import * as App from "./App.ts"
import * as ServiceMain from "./ServiceMain.ts"

// The first SIGTERM drains the node (DRAIN_SECONDS), a second one or SIGINT stops it at once; once
// its finalizers have run (browsers killed, sessions recorded, Postgres stopped) that is a clean exit.
ServiceMain.serve(App.layerFromEnv).pipe(
  ServiceMain.runMain({ teardown: (exit, onExit) => onExit(ServiceMain.exitCode(exit)) })
)
