import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { JobRetention } from "../../../src/features/jobs/JobRetention.ts"
import { BlobStore } from "../../../src/platform/blobs/BlobStore.ts"
import { request, type RequestOptions, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const DAY = 86_400_000

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

// No node has room for a browser: the jobs stay queued until the test finishes them in SQL.
layer(TestService.layer({ maxBrowsers: 0, jobRetentionDays: 30 }), { excludeTestServices: true })(
  "job retention",
  (it) => {
    it.effect(
      "deletes finished jobs past JOB_RETENTION_DAYS with their result blobs; unfinished and recent ones stay",
      () =>
        Effect.gen(function* () {
          const service = yield* TestService.TestService
          const { key } = yield* signUp(service.baseUrl)
          const sql = yield* SqlClient.SqlClient
          const blobs = yield* BlobStore
          const submit = Effect.gen(function* () {
            const created = yield* api("POST", "/v1/jobs", {
              key,
              body: { kind: "screenshot", input: { url: "https://example.com/" } }
            })
            assert.strictEqual(created.status, 201, created.text)
            return created.json.id as string
          })
          const [oldCancelled, oldSucceeded, recentCancelled, oldQueued] = [
            yield* submit,
            yield* submit,
            yield* submit,
            yield* submit
          ]
          for (const id of [oldCancelled!, recentCancelled!])
            assert.strictEqual((yield* api("POST", `/v1/jobs/${id}/cancel`, { key })).status, 200)
          const ago = (days: number) => new Date(Date.now() - days * DAY)
          yield* sql`UPDATE jobs SET finished_at = ${ago(31)} WHERE id = ${oldCancelled!}`
          // A job that succeeded 31 days ago, its result file in this node's blob store.
          const resultKey = `jobs/${oldSucceeded!}/1`
          const file = Path.join(service.config.dataDir, "result.png")
          yield* Effect.promise(() => Fs.writeFile(file, "png bytes"))
          yield* blobs.putFile(resultKey, file)
          yield* sql`
            UPDATE jobs SET state = 'succeeded', attempts = 1, result = '{}'::jsonb, result_key = ${resultKey},
              result_content_type = 'image/png', result_bytes = 9, result_node_id = 'local',
              next_attempt_at = NULL, finished_at = ${ago(31)}
            WHERE id = ${oldSucceeded!}`
          yield* sql`
            INSERT INTO job_attempts (job_id, number, node_id, started_at, finished_at, outcome)
            VALUES (${oldSucceeded!}, 1, 'local', ${ago(31)}, ${ago(31)}, 'succeeded')`
          assert.strictEqual(
            (yield* api("GET", `/v1/jobs/${oldSucceeded!}/result`, { key })).status,
            200,
            "its result is served until it goes"
          )
          // Queued for 60 days: not finished, so kept whatever its age.
          yield* sql`UPDATE jobs SET created_at = ${ago(60)} WHERE id = ${oldQueued!}`

          assert.strictEqual(yield* (yield* JobRetention).purge, 2)

          const left = yield* sql<{ id: string }>`
            SELECT id FROM jobs WHERE id IN (${oldCancelled!}, ${oldSucceeded!}, ${recentCancelled!}, ${oldQueued!})`
          assert.deepStrictEqual(left.map((row) => row.id).sort(), [recentCancelled!, oldQueued!].sort())
          const attempts = yield* sql`SELECT 1 FROM job_attempts WHERE job_id = ${oldSucceeded!}`
          assert.lengthOf(attempts, 0, "its attempts go with it")
          assert.strictEqual((yield* blobs.stat(resultKey))._tag, "None", "and its result blob")
          const gone = yield* api("GET", `/v1/jobs/${oldSucceeded!}`, { key })
          assert.deepStrictEqual([gone.status, gone.json.error.code], [404, "job_not_found"])
          assert.strictEqual((yield* api("GET", `/v1/jobs/${oldQueued!}`, { key })).json.state, "queued")
          // Nothing more to do on the next round.
          assert.strictEqual(yield* (yield* JobRetention).purge, 0)
        })
    )
  }
)
