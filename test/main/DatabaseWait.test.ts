import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Net from "node:net"
import { request } from "../support/Client.ts"
import { startService } from "../support/ServiceProcess.ts"
import * as TestService from "../support/TestService.ts"

/**
 * A database that comes up after the service: `port` refuses connections until `open` is called,
 * then passes them to the real Postgres at `target`.
 */
const lateDatabase = (target: URL) =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const port = yield* TestService.freePort
      const server = Net.createServer((client) => {
        // The run's Postgres listens on a Unix socket (`?host=DIR`), or on TCP.
        const socketDir = target.searchParams.get("host")
        const upstream =
          socketDir === null
            ? Net.connect(Number(target.port), target.hostname)
            : Net.connect(`${socketDir}/.s.PGSQL.${target.port}`)
        client.pipe(upstream).pipe(client)
        const close = () => {
          client.destroy()
          upstream.destroy()
        }
        client.on("error", close)
        upstream.on("error", close)
      })
      const open = Effect.promise(
        () => new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
      )
      return { port, open, server }
    }),
    ({ server }) => Effect.sync(() => server.close())
  )

describe("a service whose database is not up yet", () => {
  it.live(
    "waits for it, a try a second, and serves once it answers: a node started beside its database in one compose file",
    () =>
      Effect.gen(function* () {
        const databaseUrl = new URL(yield* TestService.freshDatabase)
        const database = yield* lateDatabase(databaseUrl)
        const late = new URL(databaseUrl)
        late.hostname = "127.0.0.1"
        late.port = String(database.port)
        late.searchParams.delete("host")
        const port = yield* TestService.freePort
        // Opened 3 s after the service starts: it must not have given up by then.
        yield* Effect.forkScoped(Effect.delay(database.open, "3 seconds"))
        const startedAt = Date.now()
        const service = yield* startService({
          PORT: String(port),
          DATA_DIR: yield* TestService.freshDataDir,
          DATABASE_URL: late.toString(),
          BROWSER_POOL_SIZE: "0"
        })
        assert.isAtLeast(Date.now() - startedAt, 3_000, "ready only once the database answered")
        const health = yield* request(service.baseUrl, "GET", "/readyz")
        assert.strictEqual(health.status, 200)
      }).pipe(Effect.scoped),
    90_000
  )
})
