// The round trips' floor of a create, a GET and a DELETE: a bare Node HTTP
// server in a process of its own (as the service runs in its own), which
// makes the same round trips to the same Postgres through the same driver
// (@effect/sql-pg) as the service's answer does, with no work in them: trivial
// statements on a table of one row, in a database of their own on the
// service's own server. What the service's answer costs beyond this is its
// own; this much a process that asks Postgres as often pays on this machine
// whatever it does. See bench/README.md ("the round trips' floor").
//
// Run by the share mode (`Share.ts`, `startRoundTripFloor`): `node
// --experimental-strip-types bench/session-lifecycle/RoundTripFloor.ts` with
// `FLOOR_DATABASE_URL` set; it prints its port on stdout once it listens.
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as Http from "node:http"

const url = process.env.FLOOR_DATABASE_URL
if (url === undefined) throw new Error("FLOOR_DATABASE_URL is not set")

const scope = Effect.runSync(Scope.make())
const context = await Effect.runPromise(
  Layer.buildWithScope(
    // The service's own pool settings (src/platform/db/Database.ts).
    PgClient.layer({ url: Redacted.make(url), maxConnections: 20, idleTimeout: "60 seconds" }),
    scope
  )
)
const sql = Context.get(context, SqlClient.SqlClient)

await Effect.runPromise(
  Effect.gen(function* () {
    yield* sql`CREATE TABLE IF NOT EXISTS floor_rows (id int PRIMARY KEY, n bigint NOT NULL)`
    yield* sql`CREATE TABLE IF NOT EXISTS floor_log (id bigserial PRIMARY KEY, at timestamptz NOT NULL)`
    yield* sql`INSERT INTO floor_rows (id, n) VALUES (1, 0) ON CONFLICT DO NOTHING`
  })
)

const read = sql`SELECT n FROM floor_rows WHERE id = ${1}`
const write = sql`UPDATE floor_rows SET n = n + 1 WHERE id = ${1}`

/**
 * A create's round trips, as its spans show them (`BENCH_SPANS=tree`): the
 * nodes with room; the admission's transaction (BEGIN, the account's lock, its
 * open sessions, the placement's lock and count, the insert, COMMIT); the
 * ready's update, its own transaction.
 */
const create = Effect.gen(function* () {
  yield* read
  yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`SELECT n FROM floor_rows WHERE id = ${1} FOR UPDATE`
      yield* sql`SELECT count(*)::int AS count FROM floor_rows`
      yield* sql`SELECT pg_advisory_xact_lock(${1}, ${2})`
      yield* read
      yield* sql`INSERT INTO floor_log (at) VALUES (now())`
    })
  )
  yield* write
})

/** A GET's one read; a DELETE's one statement, its own transaction. */
const routes: Record<string, { status: number; work: Effect.Effect<unknown, unknown> }> = {
  POST: { status: 201, work: create },
  GET: { status: 200, work: read },
  DELETE: { status: 204, work: write }
}

/** About the size of a session's short shape. */
const BODY = JSON.stringify({
  id: "00000000-0000-4000-8000-000000000000",
  object: "session",
  status: "creating",
  cdp_url: "ws://127.0.0.1:0/sessions/00000000-0000-4000-8000-000000000000",
  created_at: new Date(0).toISOString(),
  expires_at: new Date(0).toISOString()
})

const server = Http.createServer((request, response) => {
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.on("end", () => {
    const route = routes[request.method ?? ""]
    if (route === undefined) return void response.writeHead(405).end()
    if (chunks.length > 0) JSON.parse(Buffer.concat(chunks).toString("utf8"))
    Effect.runPromise(route.work).then(
      () => {
        if (route.status === 204) return void response.writeHead(204).end()
        response.writeHead(route.status, { "content-type": "application/json" }).end(BODY)
      },
      (error: unknown) => {
        process.stderr.write(`[floor] ${String(error)}\n`)
        response.writeHead(500).end()
      }
    )
  })
})
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("no port")
  process.stdout.write(`${address.port}\n`)
})
const stop = () => {
  server.close()
  void Effect.runPromise(Scope.close(scope, Exit.void)).finally(() => process.exit(0))
}
process.on("SIGTERM", stop)
// The bench holds the other end of stdin: a bench that dies, by any signal, ends this too.
process.stdin.on("end", stop)
process.stdin.resume()
