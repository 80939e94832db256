import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { JobRetention } from "../../../src/features/jobs/JobRetention.ts"
import { request, type RequestOptions, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const CAP = 3

const REFUSED = {
  error: {
    code: "resource_limit",
    message: `This account has reached its limit of ${CAP} jobs; finished ones are deleted 30 days after they end.`
  }
}

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const newUser = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

const submit = (key: string) =>
  api("POST", "/v1/jobs", { key, body: { kind: "screenshot", input: { url: "https://example.com/" } } })

const kept = (key: string) =>
  Effect.gen(function* () {
    const accountId = (yield* api("GET", "/v1/accounts/current", { key })).json.account.id
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{
      n: number
    }>`SELECT count(*)::int AS n FROM jobs WHERE account_id = ${accountId}`
    return row!.n
  })

// No node has room for a browser: the jobs stay queued, and queued jobs count.
layer(TestService.layer({ maxBrowsers: 0, jobRetentionDays: 30, limits: { jobsPerAccount: CAP } }), {
  excludeTestServices: true
})("an account's jobs", (it) => {
  it.effect(
    "past LIMIT_JOBS_PER_ACCOUNT kept are refused 409 resource_limit, until the retention frees one",
    () =>
      Effect.gen(function* () {
        const [mine, other] = [yield* newUser, yield* newUser]
        const ids: Array<string> = []
        for (let i = 0; i < CAP; i++) {
          const created = yield* submit(mine.key)
          assert.strictEqual(created.status, 201, created.text)
          ids.push(created.json.id)
        }
        const over = yield* submit(mine.key)
        assert.strictEqual(over.status, 409, over.text)
        assert.deepStrictEqual(over.json, REFUSED)
        assert.strictEqual((yield* submit(other.key)).status, 201, "another account's are its own")

        // A cancelled job is finished, and kept: it still counts until its retention ends.
        assert.strictEqual((yield* api("POST", `/v1/jobs/${ids[0]}/cancel`, { key: mine.key })).status, 200)
        assert.strictEqual((yield* submit(mine.key)).status, 409)
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE jobs SET finished_at = now() - interval '31 days' WHERE id = ${ids[0]!}`
        assert.isAtLeast(yield* (yield* JobRetention).purge, 1)
        const again = yield* submit(mine.key)
        assert.strictEqual(again.status, 201, again.text)
        assert.strictEqual(yield* kept(mine.key), CAP)
      })
  )

  it.effect("created in parallel at the boundary never pass the cap", () =>
    Effect.gen(function* () {
      const { key } = yield* newUser
      assert.strictEqual((yield* submit(key)).status, 201)
      const answers = yield* Effect.all(
        Array.from({ length: 8 }, () => submit(key)),
        { concurrency: "unbounded" }
      )
      const statuses = answers.map((answer) => answer.status).sort()
      assert.deepStrictEqual(statuses, [201, 201, 409, 409, 409, 409, 409, 409], JSON.stringify(statuses))
      assert.strictEqual(yield* kept(key), CAP)
    })
  )
})
