import { Effect, Exit, Scope } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import type { TestProject } from "vitest/node"
import * as EmbeddedPostgres from "../../src/platform/db/EmbeddedPostgres.ts"

declare module "vitest" {
  export interface ProvidedContext {
    /** A Postgres every test file creates its own database in. */
    adminDatabaseUrl: string
  }
}

export const TEST_ROOT = Path.resolve(".test-data")

/**
 * Data dirs a run that ended without its cleanup left (a day old): another
 * run going on at the same time keeps its own, and one still mounted (a
 * sandbox a killed service left) stays rather than failing the run.
 */
const removeStaleRuns = async () => {
  const runs = Path.join(TEST_ROOT, "runs")
  const cutoff = Date.now() - 86_400_000
  for (const name of await Fs.readdir(runs).catch(() => [] as Array<string>)) {
    const stat = await Fs.stat(Path.join(runs, name)).catch(() => undefined)
    if (stat === undefined || stat.mtimeMs > cutoff) continue
    await Fs.rm(Path.join(runs, name), { recursive: true, force: true }).catch(() => undefined)
  }
}

/**
 * One real Postgres for the whole run (or `TEST_DATABASE_URL`); each test file
 * gets its own database in it, so files stay independent.
 */
export default async function setup(project: TestProject) {
  const external = process.env.TEST_DATABASE_URL
  if (external !== undefined && external !== "") {
    project.provide("adminDatabaseUrl", external)
    return
  }
  const scope = Effect.runSync(Scope.make())
  await removeStaleRuns()
  const server = await Effect.runPromise(
    EmbeddedPostgres.start({ dir: Path.join(TEST_ROOT, "postgres"), ephemeral: true }).pipe(
      Scope.provide(scope)
    )
  )
  project.provide("adminDatabaseUrl", server.url())
  return async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}
