import * as Path from "node:path"
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Two files at a time, one a core: each has its own Postgres database,
    // data dir, ports and browser pool, so they do not contend for anything
    // but the CPU. A third worker gains nothing: two already keep both cores busy.
    fileParallelism: true,
    maxWorkers: 2,
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
