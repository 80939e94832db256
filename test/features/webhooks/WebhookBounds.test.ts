import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { request, type RequestOptions, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const CAP = 3

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const newUser = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

/** A webhook the SSRF guard takes (loopback is in `WEBHOOK_ALLOW_CIDRS`); nothing is delivered to it. */
const createHook = (key: string) =>
  api("POST", "/v1/webhooks", { key, body: { url: "http://127.0.0.1:9/hook", events: ["session.ready"] } })

const stored = (key: string) =>
  Effect.gen(function* () {
    const accountId = (yield* api("GET", "/v1/accounts/current", { key })).json.account.id
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{
      n: number
    }>`SELECT count(*)::int AS n FROM webhooks WHERE account_id = ${accountId}`
    return row!.n
  })

const REFUSED = {
  error: {
    code: "resource_limit",
    message: `This account has reached its limit of ${CAP} webhooks; delete one first.`
  }
}

layer(TestService.layer({ webhookAllowCidrs: "127.0.0.1/32", limits: { webhooksPerAccount: CAP } }), {
  excludeTestServices: true
})("an account's webhooks", (it) => {
  it.effect("past LIMIT_WEBHOOKS_PER_ACCOUNT are refused 409 resource_limit, until one is deleted", () =>
    Effect.gen(function* () {
      const [mine, other] = [yield* newUser, yield* newUser]
      const ids: Array<string> = []
      for (let i = 0; i < CAP; i++) {
        const created = yield* createHook(mine.key)
        assert.strictEqual(created.status, 201, created.text)
        ids.push(created.json.id)
      }
      const refused = yield* createHook(mine.key)
      assert.strictEqual(refused.status, 409, refused.text)
      assert.deepStrictEqual(refused.json, REFUSED)
      assert.strictEqual(yield* stored(mine.key), CAP, "a refusal writes nothing")
      // The cap is the account's own: another account's first webhook is not its business.
      assert.strictEqual((yield* createHook(other.key)).status, 201)

      assert.strictEqual((yield* api("DELETE", `/v1/webhooks/${ids[0]}`, { key: mine.key })).status, 204)
      const again = yield* createHook(mine.key)
      assert.strictEqual(again.status, 201, again.text)
      assert.strictEqual(yield* stored(mine.key), CAP)
    })
  )

  it.effect("created in parallel at the boundary never pass the cap", () =>
    Effect.gen(function* () {
      const { key } = yield* newUser
      assert.strictEqual((yield* createHook(key)).status, 201)
      const answers = yield* Effect.all(
        Array.from({ length: 8 }, () => createHook(key)),
        { concurrency: "unbounded" }
      )
      const statuses = answers.map((answer) => answer.status).sort()
      assert.deepStrictEqual(statuses, [201, 201, 409, 409, 409, 409, 409, 409], JSON.stringify(statuses))
      for (const answer of answers.filter((answer) => answer.status === 409))
        assert.deepStrictEqual(answer.json, REFUSED)
      assert.strictEqual(yield* stored(key), CAP)
    })
  )
})
