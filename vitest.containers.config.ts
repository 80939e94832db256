import * as Path from "node:path"
import { defineConfig } from "vitest/config"

/**
 * The container image and compose file (test/container): run after the rest of the suite, one file
 * and one test at a time (an image build takes both cores), and reported apart (`npm test`).
 */
export default defineConfig({
  test: {
    include: ["test/container/**/*.test.ts"],
    fileParallelism: false,
    maxWorkers: 1,
    testTimeout: 30 * 60_000,
    hookTimeout: 10 * 60_000,
    globalSetup: ["test/support/globalSetup.ts"],
    env: { NODE_COMPILE_CACHE: Path.resolve(".test-data", "compile-cache"), TEST_WORKERS: "1" }
  }
})
