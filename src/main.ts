import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import * as App from "./App.ts"

Layer.launch(App.layerFromEnv).pipe(NodeRuntime.runMain)
