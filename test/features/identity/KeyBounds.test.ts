import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { request, type RequestOptions, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const CAP = 3

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const newUser = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

const refused = (remedy: string) => ({
  error: {
    code: "resource_limit",
    message: `This account has reached its limit of ${CAP} live API keys; ${remedy}.`
  }
})

/** The account's keys that authenticate now (not revoked, or in a rotation's grace). */
const live = (accountId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ n: number }>`
      SELECT count(*)::int AS n FROM api_keys
      WHERE account_id = ${accountId} AND (revoked_at IS NULL OR revoked_at > now())`
    return row!.n
  })

layer(TestService.layer({ limits: { keysPerAccount: CAP } }), { excludeTestServices: true })(
  "an account's API keys",
  (it) => {
    it.effect(
      "past LIMIT_KEYS_PER_ACCOUNT live ones are refused 409 resource_limit, until one is revoked",
      () =>
        Effect.gen(function* () {
          // Its first key is the sign-up's.
          const user = yield* newUser
          const accountId = (yield* api("GET", "/v1/accounts/current", { key: user.key })).json.account.id
          const create = (name: string) => api("POST", "/v1/keys", { cookie: user.cookie, body: { name } })
          for (const name of ["second", "third"]) assert.strictEqual((yield* create(name)).status, 201)
          const over = yield* create("fourth")
          assert.strictEqual(over.status, 409, over.text)
          assert.deepStrictEqual(over.json, refused("revoke one first"))
          assert.strictEqual(yield* live(accountId), CAP, "a refusal writes nothing")

          // A rotation with a grace keeps the old key live beside the new one: past the cap too.
          const graced = yield* api("POST", `/v1/keys/${user.keyId}/rotate`, {
            cookie: user.cookie,
            body: { grace_days: 7 }
          })
          assert.strictEqual(graced.status, 409, graced.text)
          assert.deepStrictEqual(graced.json, refused("revoke one first, or rotate with grace_days 0"))
          // One without a grace replaces it.
          const replaced = yield* api("POST", `/v1/keys/${user.keyId}/rotate`, {
            cookie: user.cookie,
            body: { grace_days: 0 }
          })
          assert.strictEqual(replaced.status, 200, replaced.text)
          assert.strictEqual(yield* live(accountId), CAP)

          assert.strictEqual(
            (yield* api("DELETE", `/v1/keys/${replaced.json.id}`, { cookie: user.cookie })).status,
            204
          )
          assert.strictEqual((yield* create("again")).status, 201)
          assert.strictEqual(yield* live(accountId), CAP)
        })
    )

    it.effect("a service account's keys count in its account", () =>
      Effect.gen(function* () {
        const user = yield* newUser
        const org = yield* api("POST", "/v1/accounts/organizations", {
          cookie: user.cookie,
          body: { name: `org-${user.userId.slice(0, 8)}` }
        })
        assert.strictEqual(org.status, 200, org.text)
        const inOrg = { cookie: user.cookie, headers: { "x-service-account": org.json.account.id } }
        for (const name of ["a", "b", "c"])
          assert.strictEqual((yield* api("POST", "/v1/keys", { ...inOrg, body: { name } })).status, 201)
        const robot = yield* api("POST", "/v1/accounts/current/service-accounts", {
          ...inOrg,
          body: { name: "robot", role: "member" }
        })
        assert.strictEqual(robot.status, 201, robot.text)
        const minted = yield* api(
          "POST",
          `/v1/accounts/current/service-accounts/${robot.json.service_account.id}/keys`,
          { ...inOrg, body: { name: "robot key" } }
        )
        assert.strictEqual(minted.status, 409, minted.text)
        assert.deepStrictEqual(minted.json, refused("revoke one first"))
        // The personal account's own keys are another count.
        assert.strictEqual(
          (yield* api("POST", "/v1/keys", { cookie: user.cookie, body: { name: "mine" } })).status,
          201
        )
      })
    )

    it.effect("created in parallel at the boundary never pass the cap", () =>
      Effect.gen(function* () {
        const user = yield* newUser
        const accountId = (yield* api("GET", "/v1/accounts/current", { key: user.key })).json.account.id
        const answers = yield* Effect.all(
          Array.from({ length: 8 }, (_, i) =>
            api("POST", "/v1/keys", { cookie: user.cookie, body: { name: `k${i}` } })
          ),
          { concurrency: "unbounded" }
        )
        const statuses = answers.map((answer) => answer.status).sort()
        assert.deepStrictEqual(statuses, [201, 201, 409, 409, 409, 409, 409, 409], JSON.stringify(statuses))
        assert.strictEqual(yield* live(accountId), CAP)
      })
    )
  }
)
