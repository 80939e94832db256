// GET /v1/usage with many sessions: an account with BENCH_SESSIONS session
// rows this month (default 100,000) across regions, keys and days, timed
// through the Usage service on a real (embedded) Postgres, with the covering
// index and without it. See bench/README.md.
import { ApiKeysRepo } from "../../src/features/identity/ApiKeysRepo.ts"
import { SessionsRepo } from "../../src/features/sessions/SessionsRepo.ts"
import { Effect, Exit, Layer, Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import { rmSync } from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { ServiceConfig } from "../../src/platform/config/Config.ts"
import * as Database from "../../src/platform/db/Database.ts"
import { Usage } from "../../src/features/usage/Usage.ts"

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 100_000)
const RUNS = Number(process.env.BENCH_RUNS ?? 20)
const log = (message: string) => process.stderr.write(`[bench] ${message}\n`)

const dataDir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "rbs-usage-"))
await Fs.chmod(dataDir, 0o755)
const scope = Effect.runSync(Scope.make())
// Synchronous: an exit handler cannot wait for a promise.
process.on("exit", () => rmSync(dataDir, { recursive: true, force: true }))

const percentile = (values: ReadonlyArray<number>, p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)]!

const program = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const usage = yield* Usage
  const accountId = Crypto.randomUUID()
  const userId = Crypto.randomUUID()
  yield* sql`INSERT INTO users (id, email, password_hash, created_at) VALUES (${userId}, 'bench@example.com', 'x', now())`
  yield* sql`INSERT INTO accounts (id, name, kind, created_at) VALUES (${accountId}, 'bench', 'personal', now())`
  const keys = Array.from({ length: 5 }, () => Crypto.randomUUID())
  for (const [i, key] of keys.entries()) {
    yield* sql`
      INSERT INTO api_keys (id, account_id, created_by, name, prefix, secret_hash, created_at)
      VALUES (${key}, ${accountId}, ${userId}, ${`key ${i}`}, ${`svc_live_${i}xx`}, ${Crypto.randomBytes(32)}, now())`
  }
  // Another account's sessions share the table, as they would.
  const otherId = Crypto.randomUUID()
  yield* sql`INSERT INTO accounts (id, name, kind, created_at) VALUES (${otherId}, 'other', 'personal', now())`
  log(`inserting ${SESSIONS} sessions of the account (and as many of another) across this month`)
  const started = performance.now()
  for (const owner of [accountId, otherId]) {
    yield* sql`
      INSERT INTO sessions (id, account_id, api_key_id, status, profile, device, ttl_seconds, node_id, region,
        created_at, expires_at, ended_at, ended_reason, bytes_up, bytes_down, billed_micro_usd)
      SELECT 'sess_' || gen_random_uuid(), ${owner},
        (ARRAY[${keys[0]!}, ${keys[1]!}, ${keys[2]!}, ${keys[3]!}, ${keys[4]!}, NULL]::uuid[])[1 + i % 6],
        'closed', 'default', 'Chromium 156 headless, 1280x720', 600, 'local',
        (ARRAY['local', 'eu', 'us'])[1 + i % 3],
        t, t + interval '10 minutes', t + interval '5 minutes', 'client_delete',
        (i * 7919) % 100000, (i * 104729) % 5000000, ((i * 7919) % 100000 + (i * 104729) % 5000000) / 200
      FROM generate_series(1::bigint, ${SESSIONS}::bigint) AS i,
        LATERAL (SELECT date_trunc('month', now()) + (now() - date_trunc('month', now())) * (i::float / ${SESSIONS + 1}) AS t) AS at`
  }
  yield* sql`VACUUM ANALYZE sessions`
  log(`inserted in ${((performance.now() - started) / 1000).toFixed(1)} s`)

  const measure = (label: string) =>
    Effect.gen(function* () {
      const samples: Array<number> = []
      let report: any
      for (let i = 0; i < RUNS + 2; i++) {
        const t0 = performance.now()
        report = yield* usage.current(accountId)
        if (i >= 2) samples.push(performance.now() - t0)
      }
      if (report.totals.sessions !== SESSIONS) throw new Error(`${label}: counted ${report.totals.sessions}`)
      return { label, p50: percentile(samples, 50), p95: percentile(samples, 95), days: report.by_day.length }
    })

  const indexed = yield* measure("with sessions_usage_idx (account, created_at) INCLUDE (...)")
  yield* sql`DROP INDEX sessions_usage_idx`
  yield* sql`ANALYZE sessions`
  const without = yield* measure("without it (account, created_at, id) only")
  return { indexed, without }
})

// The embedded Postgres stops with the scope, whether the program succeeds or not.
const result = await Effect.runPromise(
  program.pipe(
    Effect.provide(
      Usage.layer.pipe(
        Layer.provide([SessionsRepo.layer, ApiKeysRepo.layer]),
        Layer.provideMerge(Database.layer),
        Layer.provide(ServiceConfig.layer({ dataDir, logLevel: "Warn" }))
      )
    ),
    Scope.provide(scope)
  )
).finally(() => Effect.runPromise(Scope.close(scope, Exit.void)))

console.log(
  `\n## GET /v1/usage over ${SESSIONS.toLocaleString("en")} sessions of one account this month (${RUNS} runs)\n`
)
console.log("| index | p50 (ms) | p95 (ms) |")
console.log("| --- | --- | --- |")
for (const row of [result.indexed, result.without]) {
  console.log(`| ${row.label} | ${row.p50.toFixed(1)} | ${row.p95.toFixed(1)} |`)
}
await Fs.writeFile(
  new URL("./last-run.json", import.meta.url),
  JSON.stringify({ sessions: SESSIONS, ...result }, null, 2)
)
