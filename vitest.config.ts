import * as Path from "node:path"
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Three files at a time on two cores: each has its own Postgres database,
    // data dir, ports and browser pool, so they contend for nothing but the CPU.
    // With two, the cores stood 18% idle (the cluster and webhook tests' waits on
    // heartbeats and retries); a third fills that: 285 s against 304 s in a row.
    fileParallelism: true,
    maxWorkers: 3,
    // A worker runs file after file: the source is loaded once a worker, not once a file (7-8% of
    // the run before). Each file still builds its own service (database, data dir, ports, metrics).
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ["test/support/globalSetup.ts"],
    // Node's compiled code kept between the service processes and CLI runs the tests start (about
    // 300 ms of each start's 800 ms of loading).
    env: { NODE_COMPILE_CACHE: Path.resolve(".test-data", "compile-cache") }
  }
})
