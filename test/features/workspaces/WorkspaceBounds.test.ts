import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { request, type RequestOptions, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const CAP = 3

const REFUSED = {
  error: {
    code: "resource_limit",
    message: `This account has reached its limit of ${CAP} workspaces; delete one first.`
  }
}

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const newUser = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

const stored = (key: string) =>
  Effect.gen(function* () {
    const accountId = (yield* api("GET", "/v1/accounts/current", { key })).json.account.id
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{
      n: number
    }>`SELECT count(*)::int AS n FROM workspaces WHERE account_id = ${accountId}`
    return row!.n
  })

// No session runs here: nothing a refused create would have made (an import's job, an assistant's runtime) starts.
layer(
  TestService.layer({ maxBrowsers: 0, sandbox: { maxSandboxes: 0 }, limits: { workspacesPerAccount: CAP } }),
  { excludeTestServices: true }
)("an account's workspaces", (it) => {
  it.effect("past LIMIT_WORKSPACES_PER_ACCOUNT are refused 409 resource_limit, until one is deleted", () =>
    Effect.gen(function* () {
      const [mine, other] = [yield* newUser, yield* newUser]
      const create = (key: string, name: string) => api("POST", "/v1/workspaces", { key, body: { name } })
      for (const name of ["one", "two", "three"]) {
        const created = yield* create(mine.key, name)
        assert.strictEqual(created.status, 200, created.text)
      }
      const over = yield* create(mine.key, "four")
      assert.strictEqual(over.status, 409, over.text)
      assert.deepStrictEqual(over.json, REFUSED)
      // Every way a workspace is made counts: an import, and an assistant's home.
      const imported = yield* api("POST", "/v1/workspaces/import", {
        key: mine.key,
        body: { url: "https://example.com/repo.git" }
      })
      assert.strictEqual(imported.status, 409, imported.text)
      assert.deepStrictEqual(imported.json, REFUSED)
      const assistant = yield* api("POST", "/v1/assistants", { key: mine.key, body: { name: "helper" } })
      assert.strictEqual(assistant.status, 409, assistant.text)
      assert.deepStrictEqual(assistant.json, REFUSED)
      assert.strictEqual((yield* api("GET", "/v1/assistants", { key: mine.key })).json.data.length, 0)
      assert.strictEqual(yield* stored(mine.key), CAP, "a refusal writes nothing")
      assert.strictEqual((yield* create(other.key, "four")).status, 200, "another account's are its own")

      assert.strictEqual((yield* api("DELETE", "/v1/workspaces/one", { key: mine.key })).status, 204)
      const again = yield* create(mine.key, "four")
      assert.strictEqual(again.status, 200, again.text)
      assert.strictEqual(yield* stored(mine.key), CAP)
    })
  )

  it.effect("created in parallel at the boundary never pass the cap", () =>
    Effect.gen(function* () {
      const { key } = yield* newUser
      assert.strictEqual((yield* api("POST", "/v1/workspaces", { key, body: { name: "first" } })).status, 200)
      const answers = yield* Effect.all(
        Array.from({ length: 8 }, (_, i) => api("POST", "/v1/workspaces", { key, body: { name: `w${i}` } })),
        { concurrency: "unbounded" }
      )
      const statuses = answers.map((answer) => answer.status).sort()
      assert.deepStrictEqual(statuses, [200, 200, 409, 409, 409, 409, 409, 409], JSON.stringify(statuses))
      assert.strictEqual(yield* stored(key), CAP)
    })
  )
})
