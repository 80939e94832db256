import * as Path from "node:path"
import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

/**
 * The files that take longest here, most of it waiting on real time (heartbeats, drains, retries,
 * quiet windows, service processes starting), in the order they start: with no results cached (a
 * fresh clone, CI) vitest starts the largest files first, and one of these left to the end ran
 * alone for its last 15 s. The several-node files are spread out, so no three run at once.
 */
const LONGEST = [
  "platform/cluster/Drain.test.ts",
  "edge/http/Dashboard.test.ts",
  "docs/QuickStart.test.ts",
  "platform/cluster/Nodes.test.ts",
  "features/webhooks/Deliverer.test.ts",
  "features/workspaces/Workspaces.test.ts",
  "platform/cluster/Failover.test.ts",
  "runtimes/sandbox/Isolation.test.ts",
  "features/sessions/ContextSessions.test.ts",
  "features/sessions/ContextMadeAhead.test.ts",
  "platform/cluster/Workspaces.test.ts",
  "features/webhooks/Webhooks.test.ts",
  "runtimes/browser/Quiet.test.ts",
  "features/workspaces/Restart.test.ts",
  "edge/cli/Cli.test.ts",
  "platform/cluster/Webhooks.test.ts",
  "edge/live/LiveView.test.ts",
  "main/Restart.test.ts",
  "features/jobs/JobEngine.test.ts",
  "platform/cluster/Sandboxes.test.ts"
].map((file) => Path.resolve("test", file))

class LongestFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>) {
    const rank = (spec: TestSpecification) => {
      const index = LONGEST.indexOf(spec.moduleId)
      return index === -1 ? LONGEST.length : index
    }
    // The rest in vitest's own order (cached durations, else size); the sort is stable.
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b))
  }
}

/** Files at a time (each worker takes its own share of the loopback ports, `TestService.freePorts`). */
const WORKERS = 3

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The image and compose tests run after the rest, on their own (vitest.containers.config.ts).
    exclude: ["test/container/**", "**/node_modules/**"],
    // Three files at a time on two cores: each has its own Postgres database,
    // data dir, ports and browser pool, so they contend for nothing but the CPU.
    // With two, the cores stood 18% idle (the cluster and webhook tests' waits on
    // heartbeats and retries); a third fills that: 285 s against 304 s in a row.
    fileParallelism: true,
    maxWorkers: WORKERS,
    sequence: { sequencer: LongestFirst },
    // A worker runs file after file: the source is loaded once a worker, not once a file (7-8% of
    // the run before). Each file still builds its own service (database, data dir, ports, metrics).
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ["test/support/globalSetup.ts"],
    // Node's compiled code kept between the service processes and CLI runs the tests start (about
    // 300 ms of each start's 800 ms of loading).
    env: { NODE_COMPILE_CACHE: Path.resolve(".test-data", "compile-cache"), TEST_WORKERS: String(WORKERS) }
  }
})
