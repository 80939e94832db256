import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Exit } from "effect"
import * as Path from "node:path"
import * as DevCluster from "./DevCluster.ts"

// `npm run cluster`: a development cluster on this machine. See docs/operations/several-nodes.md.
const number = (name: string, fallback: number) => {
  const raw = process.env[name]
  const value = raw === undefined || raw === "" ? fallback : Number(raw)
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got ${raw}`)
  return value
}

const {
  PORT,
  DATA_DIR,
  CLUSTER_NODES,
  RUNNER_PORT,
  POSTGRES_PORT,
  REDIS_PORT,
  NODE_ID,
  RUNNER_ADDRESS,
  ...env
} = process.env

DevCluster.run({
  nodes: number("CLUSTER_NODES", 3),
  port: number("PORT", 8080),
  runnerPort: number("RUNNER_PORT", 7101),
  postgresPort: number("POSTGRES_PORT", 5433),
  redisPort: REDIS_PORT === undefined || REDIS_PORT === "" ? undefined : number("REDIS_PORT", 6380),
  dataDir: Path.resolve(DATA_DIR ?? ".data/cluster"),
  env
}).pipe(
  NodeRuntime.runMain({
    teardown: (exit, onExit) =>
      onExit(Exit.isSuccess(exit) || (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)) ? 0 : 1)
  })
)
