import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import WebSocket from "ws"
import { request, type RequestOptions, signUp } from "../../support/Client.ts"
import { until } from "../../support/Poll.ts"
import * as TestService from "../../support/TestService.ts"

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const newUser = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

/** The HTTP status a CDP connect with `key` is answered with before any upgrade. */
const connectStatus = (key: string) =>
  Effect.flatMap(TestService.TestService, (service) =>
    Effect.promise(
      () =>
        new Promise<number>((resolve) => {
          const socket = new WebSocket(
            `${service.baseUrl.replace(/^http/, "ws")}/sessions/sess_00000000-0000-4000-8000-000000000001`,
            { headers: { authorization: `Bearer ${key}` } }
          )
          socket.on("unexpected-response", (_request, response) => {
            resolve(response.statusCode ?? 0)
            socket.terminate()
          })
          socket.on("open", () => resolve(101))
          socket.on("error", () => resolve(0))
        })
    )
  )

const DAY = 86_400_000

layer(TestService.layer({ browserPoolSize: 0 }), { excludeTestServices: true })("key lifecycle", (it) => {
  describe("revocation", () => {
    it.effect("a revoked key is 401 on the very next request, REST and CDP connect alike", () =>
      Effect.gen(function* () {
        const user = yield* newUser
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: user.key })).status, 200)
        // An unknown session, so the key got past authentication: 404.
        assert.strictEqual(yield* connectStatus(user.key), 404)
        const revoked = yield* api("DELETE", `/v1/keys/${user.keyId}`, { cookie: user.cookie })
        assert.strictEqual(revoked.status, 204)
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: user.key })).status, 401)
        assert.strictEqual(yield* connectStatus(user.key), 401)
        const listed = yield* api("GET", "/v1/keys", { cookie: user.cookie })
        assert.isString(listed.json.keys[0].revoked_at)
        // Revoking again is a no-op; an unknown key is 404.
        assert.strictEqual(
          (yield* api("DELETE", `/v1/keys/${user.keyId}`, { cookie: user.cookie })).status,
          204
        )
        const unknown = yield* api("DELETE", "/v1/keys/00000000-0000-4000-8000-000000000000", {
          cookie: user.cookie
        })
        assert.deepStrictEqual([unknown.status, unknown.json.error.code], [404, "key_not_found"])
      })
    )

    it.effect("a key explicitly scoped keys.write may manage keys; revoking itself locks it out", () =>
      Effect.gen(function* () {
        const user = yield* newUser
        const manager = yield* api("POST", "/v1/keys", {
          cookie: user.cookie,
          body: { name: "rotator", scopes: ["keys.read", "keys.write"] }
        })
        const list = yield* api("GET", "/v1/keys", { key: manager.json.secret })
        assert.strictEqual(list.status, 200)
        const self = yield* api("DELETE", `/v1/keys/${manager.json.id}`, { key: manager.json.secret })
        assert.strictEqual(self.status, 204)
        assert.strictEqual((yield* api("GET", "/v1/keys", { key: manager.json.secret })).status, 401)
      })
    )
  })

  describe("rotation", () => {
    it.effect("both keys work during the grace period and the old one is 401 after it", () =>
      Effect.gen(function* () {
        const user = yield* newUser
        const sql = yield* SqlClient.SqlClient
        const before = Date.now()
        const rotated = yield* api("POST", `/v1/keys/${user.keyId}/rotate`, {
          cookie: user.cookie,
          body: { grace_days: 3 }
        })
        assert.strictEqual(rotated.status, 200, rotated.text)
        assert.match(rotated.json.secret, /^svc_live_/)
        assert.notStrictEqual(rotated.json.id, user.keyId)
        assert.deepStrictEqual([rotated.json.name, rotated.json.revoked_at], ["test", null])
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: user.key })).status, 200)
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: rotated.json.secret })).status, 200)

        const keys = (yield* api("GET", "/v1/keys", { cookie: user.cookie })).json.keys
        const old = keys.find((k: any) => k.id === user.keyId)
        const end = new Date(old.revoked_at).getTime()
        assert.isAtLeast(end, before + 3 * DAY - 5_000)
        assert.isAtMost(end, Date.now() + 3 * DAY + 5_000)

        // The grace period passes (the end moved into the past rather than waiting three days).
        // Written straight to the table (as another node would): its NOTIFY clears the kept keys.
        yield* sql`UPDATE api_keys SET revoked_at = now() - interval '1 second' WHERE id = ${user.keyId}`
        const ended = yield* until(
          api("GET", "/v1/sessions", { key: user.key }),
          (response) => response.status !== 200,
          2_000
        )
        assert.strictEqual(ended.status, 401)
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: rotated.json.secret })).status, 200)

        const twice = yield* api("POST", `/v1/keys/${user.keyId}/rotate`, { cookie: user.cookie, body: {} })
        assert.deepStrictEqual([twice.status, twice.json.error.code], [409, "key_revoked"])
      })
    )

    it.effect("grace_days 0 revokes at once; the default is 7; out of range is 400", () =>
      Effect.gen(function* () {
        const user = yield* newUser
        for (const grace_days of [-1, 31, 2.5]) {
          const response = yield* api("POST", `/v1/keys/${user.keyId}/rotate`, {
            cookie: user.cookie,
            body: { grace_days }
          })
          assert.deepStrictEqual(
            [response.status, response.json.error.code, response.json.error.message],
            [400, "invalid_field", "Invalid value for field: grace_days."],
            String(grace_days)
          )
        }
        const byDefault = yield* api("POST", `/v1/keys/${user.keyId}/rotate`, { cookie: user.cookie })
        assert.strictEqual(byDefault.status, 200)
        const keys = (yield* api("GET", "/v1/keys", { cookie: user.cookie })).json.keys
        const old = keys.find((k: any) => k.id === user.keyId)
        assert.approximately(new Date(old.revoked_at).getTime(), Date.now() + 7 * DAY, 60_000)

        const immediate = yield* api("POST", `/v1/keys/${byDefault.json.id}/rotate`, {
          cookie: user.cookie,
          body: { grace_days: 0 }
        })
        assert.strictEqual(immediate.status, 200)
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: byDefault.json.secret })).status, 401)
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: immediate.json.secret })).status, 200)
      })
    )
  })

  describe("audit", () => {
    it.effect("records key mutations with actor, IP and user agent, filterable and paged", () =>
      Effect.gen(function* () {
        const user = yield* newUser
        const made = yield* api("POST", "/v1/keys", {
          cookie: user.cookie,
          headers: { "user-agent": "audit-test/1.0" },
          body: { name: "second" }
        })
        yield* api("DELETE", `/v1/keys/${made.json.id}`, { cookie: user.cookie })
        const page = yield* api("GET", "/v1/audit/events?limit=2", { key: user.key })
        assert.strictEqual(page.status, 200, page.text)
        assert.strictEqual(page.json.data.length, 2)
        assert.strictEqual(page.json.has_more, true)
        const [revoked, created] = page.json.data
        assert.deepInclude(revoked, { action: "api_key.revoked", outcome: "success" })
        assert.deepStrictEqual(revoked.target, { type: "api_key", id: made.json.id })
        assert.deepStrictEqual(revoked.actor, { type: "user", id: user.userId, user_id: user.userId })
        assert.strictEqual(created.action, "api_key.created")
        assert.strictEqual(created.user_agent, "audit-test/1.0")
        assert.match(created.ip, /127\.0\.0\.1/)
        assert.notInclude(page.text, made.json.secret)

        const rest = yield* api("GET", `/v1/audit/events?cursor=${page.json.next_cursor}`, { key: user.key })
        assert.includeMembers(
          rest.json.data.map((e: any) => e.action),
          ["api_key.created", "user.registered"]
        )
        const filtered = yield* api("GET", `/v1/audit/events?action=api_key.&target=${made.json.id}`, {
          key: user.key
        })
        assert.deepStrictEqual(
          filtered.json.data.map((e: any) => e.action),
          ["api_key.revoked", "api_key.created"]
        )
        const future = yield* api(
          "GET",
          `/v1/audit/events?from=${new Date(Date.now() + DAY).toISOString()}`,
          {
            key: user.key
          }
        )
        assert.deepStrictEqual(future.json.data, [])
        const bad = yield* api("GET", "/v1/audit/events?from=yesterday", { key: user.key })
        assert.deepStrictEqual([bad.status, bad.json.error.code], [400, "invalid_field"])
        // Another account sees none of it.
        const other = yield* newUser
        const theirs = yield* api("GET", `/v1/audit/events?target=${made.json.id}`, { key: other.key })
        assert.deepStrictEqual(theirs.json.data, [])
      })
    )
  })
})
