import { assert, describe, layer } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import WebSocket from "ws"
import { Audit } from "../../../src/features/audit/Audit.ts"
import { type Account, request, type RequestOptions, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const newUser = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

const DAY = 86_400_000

/** The audit events of the caller's active account matching `query`, newest first. */
const events = (who: { cookie: string }, query: string, account?: string) =>
  Effect.map(
    api("GET", `/v1/audit/events?${query}`, {
      cookie: who.cookie,
      ...(account === undefined ? {} : { headers: { "x-service-account": account } })
    }),
    (response) => {
      assert.strictEqual(response.status, 200, response.text)
      return response.json.data as Array<any>
    }
  )

/** Polls until an event matching `query` shows up (a failed login is recorded off the answer's path). */
const eventually = (who: { cookie: string }, query: string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 5_000
    while (true) {
      const found = yield* events(who, query)
      if (found.length > 0 || Date.now() > deadline) return found
      yield* Effect.sleep("20 millis")
    }
  })

/** An organization owned by `owner` with `member` in it at `role`. */
const orgWith = (owner: Account, member: Account, role: string) =>
  Effect.gen(function* () {
    const created = yield* api("POST", "/v1/accounts/organizations", {
      cookie: owner.cookie,
      body: { name: `audit-${Crypto.randomBytes(4).toString("hex")}` }
    })
    assert.strictEqual(created.status, 200, created.text)
    const org = created.json.account.id as string
    const added = yield* api("POST", "/v1/accounts/current/members", {
      cookie: owner.cookie,
      headers: { "x-service-account": org },
      body: { email: member.email, role }
    })
    assert.strictEqual(added.status, 200, added.text)
    return org
  })

layer(TestService.layer({ browserPoolSize: 0, signupCreditUsd: 0 }), { excludeTestServices: true })(
  "audit trail",
  (it) => {
    describe("failures", () => {
      it.effect("a refused mutation is recorded under the route's action with outcome failure", () =>
        Effect.gen(function* () {
          const alice = yield* newUser
          const bob = yield* newUser
          const org = yield* orgWith(alice, bob, "viewer")

          const refused = yield* api("POST", "/v1/keys", {
            cookie: bob.cookie,
            headers: { "x-service-account": org, "user-agent": "viewer-agent/2.0" },
            body: { name: "not allowed" }
          })
          assert.strictEqual(refused.status, 403)

          const [event, ...rest] = yield* events(alice, "action=api_key.created", org)
          assert.strictEqual(rest.length, 0)
          assert.deepInclude(event, {
            action: "api_key.created",
            outcome: "failure",
            user_agent: "viewer-agent/2.0"
          })
          assert.deepStrictEqual(event.actor, { type: "user", id: bob.userId, user_id: bob.userId })
          assert.deepStrictEqual(event.details, { code: "forbidden" })
          assert.isNotNull(event.ip)
        })
      )

      it.effect(
        "a refused PTY open is recorded as pty.opened with outcome failure, as a route's refusal is",
        () =>
          Effect.gen(function* () {
            const alice = yield* newUser
            const bob = yield* newUser
            const org = yield* orgWith(alice, bob, "viewer")
            const service = yield* TestService.TestService
            // A viewer may not run commands (exec.write): the PTY's upgrade is refused before it opens.
            const status = yield* Effect.promise(
              () =>
                new Promise<number>((resolve) => {
                  const socket = new WebSocket(
                    `${service.baseUrl.replace("http", "ws")}/v1/sessions/sess_00000000-0000-4000-8000-000000000001/pty`,
                    { headers: { cookie: bob.cookie, origin: service.baseUrl, "x-service-account": org } }
                  )
                  socket.once("unexpected-response", (_request, response) =>
                    resolve(response.statusCode ?? 0)
                  )
                  socket.once("open", () => {
                    socket.close()
                    resolve(101)
                  })
                  socket.once("error", () => undefined)
                })
            )
            assert.strictEqual(status, 403)
            const recorded = yield* events(alice, "action=pty.opened", org).pipe(
              Effect.repeat({
                schedule: Schedule.spaced("20 millis"),
                until: (found) => found.length > 0,
                times: 100
              })
            )
            const [event, ...rest] = recorded
            assert.strictEqual(rest.length, 0)
            assert.deepInclude(event, { action: "pty.opened", outcome: "failure" })
            assert.deepStrictEqual(event.details, { code: "forbidden" })
            assert.deepStrictEqual(event.target, {
              type: "session",
              id: "sess_00000000-0000-4000-8000-000000000001"
            })
          })
      )

      it.effect("a business rule's refusal names its code and the target from the path", () =>
        Effect.gen(function* () {
          const alice = yield* newUser
          const bob = yield* newUser
          const org = yield* orgWith(alice, bob, "member")
          const demote = yield* api("PATCH", `/v1/accounts/current/members/${alice.userId}`, {
            cookie: alice.cookie,
            headers: { "x-service-account": org },
            body: { role: "admin" }
          })
          assert.strictEqual(demote.status, 409)
          assert.strictEqual(demote.json.error.code, "last_owner")

          const changed = yield* events(alice, "action=member.role_changed", org)
          assert.deepStrictEqual(
            changed.map((e) => [e.outcome, e.target, e.details]),
            [["failure", { type: "user", id: alice.userId }, { code: "last_owner" }]]
          )
        })
      )

      it.effect("probing another account's ids is recorded in the prober's account, not the target's", () =>
        Effect.gen(function* () {
          const alice = yield* newUser
          const mallory = yield* newUser
          const probe = yield* api("DELETE", `/v1/keys/${alice.keyId}`, { cookie: mallory.cookie })
          assert.strictEqual(probe.status, 404)

          const theirs = yield* events(mallory, `target=${alice.keyId}`)
          assert.deepStrictEqual(
            theirs.map((e) => [e.action, e.outcome, e.details]),
            [["api_key.revoked", "failure", { code: "key_not_found" }]]
          )
          assert.deepStrictEqual(yield* events(alice, `target=${alice.keyId}&action=api_key.revoked`), [])
        })
      )

      it.effect("a success is recorded once, with no failure beside it", () =>
        Effect.gen(function* () {
          const alice = yield* newUser
          const made = yield* api("POST", "/v1/keys", { cookie: alice.cookie, body: { name: "ok" } })
          assert.strictEqual(made.status, 201)
          const revoked = yield* api("DELETE", `/v1/keys/${made.json.id}`, { cookie: alice.cookie })
          assert.strictEqual(revoked.status, 204)
          const trail = yield* events(alice, `target=${made.json.id}`)
          assert.deepStrictEqual(
            trail.map((e) => [e.action, e.outcome]),
            [
              ["api_key.revoked", "success"],
              ["api_key.created", "success"]
            ]
          )
        })
      )
    })

    describe("people", () => {
      it.effect("password logins, good and bad, are recorded in the personal account", () =>
        Effect.gen(function* () {
          const alice = yield* newUser
          const wrong = yield* api("POST", "/auth/login", {
            body: { email: alice.email, password: "not the password" },
            headers: { "user-agent": "guesser/1.0" }
          })
          assert.strictEqual(wrong.status, 401)
          const [failed] = yield* eventually(alice, "action=user.logged_in&outcome=failure")
          assert.deepInclude(failed, { user_agent: "guesser/1.0" })
          assert.deepStrictEqual(failed.target, { type: "user", id: alice.userId })
          assert.deepStrictEqual(failed.details, { method: "password", code: "invalid_credentials" })

          // signUp logged in once already: that success is in the trail too.
          const logins = yield* events(alice, "action=user.logged_in")
          assert.deepStrictEqual(logins.map((e) => e.outcome).sort(), ["failure", "success"])
          assert.deepStrictEqual(logins.find((e) => e.outcome === "success").details, { method: "password" })
        })
      )

      it.effect("access tokens and logging out everywhere are recorded", () =>
        Effect.gen(function* () {
          const alice = yield* newUser
          const token = yield* api("POST", "/auth/token", { cookie: alice.cookie })
          assert.strictEqual(token.status, 200, token.text)
          const issued = yield* events(alice, "action=access_token.issued")
          assert.strictEqual(issued.length, 1)
          assert.strictEqual(issued[0].details.expires_at, token.json.expires_at)

          // The trail is read after the logout with a key: the cookie ends with it.
          const out = yield* api("POST", "/auth/logout-everywhere", { cookie: alice.cookie })
          assert.strictEqual(out.status, 204)
          const trail = yield* api("GET", "/v1/audit/events?action=user.", { key: alice.key })
          assert.include(
            trail.json.data.map((e: any) => e.action),
            "user.logged_out_everywhere"
          )
        })
      )
    })

    describe("retention", () => {
      it.effect("purge removes events older than AUDIT_RETENTION_DAYS and keeps the rest", () =>
        Effect.gen(function* () {
          const alice = yield* newUser
          const sql = yield* SqlClient.SqlClient
          const account = (yield* api("GET", "/v1/accounts/current", { cookie: alice.cookie })).json.account
            .id
          const at = (daysAgo: number) => new Date(Date.now() - daysAgo * DAY)
          const insert = (daysAgo: number) =>
            Effect.gen(function* () {
              const id = Crypto.randomUUID()
              yield* sql`
                INSERT INTO audit_events (id, account_id, occurred_at, actor_type, action, target_type, outcome)
                VALUES (${id}, ${account}, ${at(daysAgo)}, 'system', 'test.old', 'account', 'success')`
              return id
            })
          const expired = yield* insert(366)
          const kept = yield* insert(364)

          const removed = yield* (yield* Audit).purge
          assert.isAtLeast(removed, 1)
          const left = yield* sql<{
            id: string
          }>`SELECT id FROM audit_events WHERE id IN (${expired}, ${kept})`
          assert.deepStrictEqual(
            left.map((row) => row.id),
            [kept]
          )
          // What the retention keeps is still listed.
          const listed = yield* events(alice, "action=test.old")
          assert.deepStrictEqual(
            listed.map((e) => e.id),
            [kept]
          )
        })
      )
    })
  }
)
