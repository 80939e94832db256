import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Chromium sessions are heavy on a 2-core machine: files run one at a time,
    // each against its own Postgres database and browser pool.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ["test/support/globalSetup.ts"]
  }
})
