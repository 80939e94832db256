import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { request, type RequestOptions, signUp, uniqueEmail } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const newUser = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

const orgName = () => `org-${Math.random().toString(36).slice(2, 10)}`

/** An organization owned by `cookie`'s user; its id and name. */
const createOrg = (cookie: string) =>
  Effect.gen(function* () {
    const name = orgName()
    const created = yield* api("POST", "/v1/accounts/organizations", { cookie, body: { name } })
    assert.strictEqual(created.status, 200, created.text)
    return { id: created.json.account.id as string, name }
  })

layer(TestService.layer({ browserPoolSize: 0, signupCreditUsd: 0 }), { excludeTestServices: true })(
  "accounts and tenancy",
  (it) => {
    describe("organizations and the active account", () => {
      it.effect("creates an organization owned by the caller and selects it by id, name or personal", () =>
        Effect.gen(function* () {
          const alice = yield* newUser
          const name = orgName()
          const created = yield* api("POST", "/v1/accounts/organizations", {
            cookie: alice.cookie,
            body: { name }
          })
          assert.strictEqual(created.status, 200)
          assert.deepInclude(created.json.account, {
            name,
            kind: "organization",
            role: "owner",
            personal: false
          })
          const org = created.json.account.id

          const list = yield* api("GET", "/v1/accounts", { cookie: alice.cookie })
          assert.deepStrictEqual(
            list.json.accounts.map((a: any) => [a.kind, a.role]),
            [
              ["personal", "owner"],
              ["organization", "owner"]
            ]
          )
          const current = (selector?: string) =>
            api("GET", "/v1/accounts/current", {
              cookie: alice.cookie,
              ...(selector === undefined ? {} : { headers: { "x-service-account": selector } })
            })
          assert.strictEqual((yield* current()).json.account.personal, true)
          assert.strictEqual((yield* current("personal")).json.account.personal, true)
          assert.strictEqual((yield* current(org)).json.account.id, org)
          assert.strictEqual((yield* current(name)).json.account.id, org)
          for (const unknown of ["nope", "00000000-0000-4000-8000-000000000000", name.toUpperCase()]) {
            const response = yield* current(unknown)
            assert.strictEqual(response.status, 404, unknown)
            assert.deepStrictEqual(response.json, {
              error: { code: "account_not_found", message: "Account not found." }
            })
          }

          const taken = yield* api("POST", "/v1/accounts/organizations", {
            cookie: alice.cookie,
            body: { name: name.toUpperCase() }
          })
          assert.deepStrictEqual([taken.status, taken.json.error.code], [409, "account_name_taken"])
          for (const bad of ["", "personal", "a@b.c", "-x", "x".repeat(65)]) {
            const response = yield* api("POST", "/v1/accounts/organizations", {
              cookie: alice.cookie,
              body: { name: bad }
            })
            assert.deepStrictEqual([response.status, response.json.error.code], [400, "invalid_field"], bad)
          }
          // Organizations are made by people, not keys.
          const byKey = yield* api("POST", "/v1/accounts/organizations", {
            key: alice.key,
            body: { name: orgName() }
          })
          assert.strictEqual(byKey.status, 403)

          // Someone else's organization is not found, never forbidden.
          const bob = yield* newUser
          const foreign = yield* api("GET", "/v1/accounts/current", {
            cookie: bob.cookie,
            headers: { "x-service-account": org }
          })
          assert.deepStrictEqual([foreign.status, foreign.json.error.code], [404, "account_not_found"])
        })
      )

      it.effect("binds a key to the account it was made in: naming another account is 403", () =>
        Effect.gen(function* () {
          const alice = yield* newUser
          const org = yield* createOrg(alice.cookie)
          const orgKey = yield* api("POST", "/v1/keys", {
            cookie: alice.cookie,
            headers: { "x-service-account": org.id },
            body: { name: "org key" }
          })
          assert.strictEqual(orgKey.status, 201)
          const key = orgKey.json.secret
          const current = yield* api("GET", "/v1/accounts/current", { key })
          assert.strictEqual(current.json.account.id, org.id)
          const same = yield* api("GET", "/v1/accounts/current", {
            key,
            headers: { "x-service-account": org.name }
          })
          assert.strictEqual(same.status, 200)
          for (const other of ["personal", "00000000-0000-4000-8000-000000000000"]) {
            const response = yield* api("GET", "/v1/sessions", {
              key,
              headers: { "x-service-account": other }
            })
            assert.deepStrictEqual([response.status, response.json.error.code], [403, "forbidden"], other)
          }
          // The personal key sees its own keys only, the org's are listed in the org.
          const personalKeys = yield* api("GET", "/v1/keys", { cookie: alice.cookie })
          assert.deepStrictEqual(
            personalKeys.json.keys.map((k: any) => k.id),
            [alice.keyId]
          )
          const orgKeys = yield* api("GET", "/v1/keys", {
            cookie: alice.cookie,
            headers: { "x-service-account": org.id }
          })
          assert.deepStrictEqual(
            orgKeys.json.keys.map((k: any) => k.id),
            [orgKey.json.id]
          )
        })
      )
    })

    describe("members and roles", () => {
      it.effect("adds, lists, changes and removes members by the role rules", () =>
        Effect.gen(function* () {
          const owner = yield* newUser
          const admin = yield* newUser
          const member = yield* newUser
          const org = yield* createOrg(owner.cookie)
          const as = (who: { cookie: string }) => ({
            cookie: who.cookie,
            headers: { "x-service-account": org.id }
          })

          const added = yield* api("POST", "/v1/accounts/current/members", {
            ...as(owner),
            body: { email: admin.email, role: "admin" }
          })
          assert.strictEqual(added.status, 200, added.text)
          assert.strictEqual(added.json.account.id, org.id)
          assert.deepInclude(added.json.member, {
            user_id: admin.userId,
            email: admin.email,
            role: "admin",
            owner: false
          })
          const again = yield* api("POST", "/v1/accounts/current/members", {
            ...as(owner),
            body: { email: admin.email.toUpperCase() }
          })
          assert.deepStrictEqual([again.status, again.json.error.code], [409, "already_member"])
          const nobody = yield* api("POST", "/v1/accounts/current/members", {
            ...as(owner),
            body: { email: uniqueEmail() }
          })
          assert.deepStrictEqual([nobody.status, nobody.json.error.code], [404, "user_not_found"])
          const badRole = yield* api("POST", "/v1/accounts/current/members", {
            ...as(owner),
            body: { email: member.email, role: "emperor" }
          })
          assert.deepStrictEqual([badRole.status, badRole.json.error.code], [400, "invalid_field"])

          // An admin adds members but not owners.
          const adminMakesOwner = yield* api("POST", "/v1/accounts/current/members", {
            ...as(admin),
            body: { email: member.email, role: "owner" }
          })
          assert.strictEqual(adminMakesOwner.status, 403)
          const adminAdds = yield* api("POST", "/v1/accounts/current/members", {
            ...as(admin),
            body: { email: member.email }
          })
          assert.strictEqual(adminAdds.json.member.role, "member")
          // A member manages no one.
          const memberAdds = yield* api("POST", "/v1/accounts/current/members", {
            ...as(member),
            body: { email: owner.email }
          })
          assert.strictEqual(memberAdds.status, 403)
          const memberDemotes = yield* api("PATCH", `/v1/accounts/current/members/${admin.userId}`, {
            ...as(member),
            body: { role: "viewer" }
          })
          assert.strictEqual(memberDemotes.status, 403)

          const members = yield* api("GET", "/v1/accounts/current/members", as(member))
          assert.deepStrictEqual(
            members.json.members.map((m: any) => [m.email, m.role, m.owner]),
            [
              [owner.email, "owner", true],
              [admin.email, "admin", false],
              [member.email, "member", false]
            ]
          )

          // The last owner can neither be demoted nor leave; an admin cannot touch an owner.
          const demoteLast = yield* api("PATCH", `/v1/accounts/current/members/${owner.userId}`, {
            ...as(owner),
            body: { role: "admin" }
          })
          assert.deepStrictEqual([demoteLast.status, demoteLast.json.error.code], [409, "last_owner"])
          const leaveLast = yield* api("DELETE", `/v1/accounts/current/members/${owner.userId}`, as(owner))
          assert.deepStrictEqual([leaveLast.status, leaveLast.json.error.code], [409, "last_owner"])
          const adminRemovesOwner = yield* api(
            "DELETE",
            `/v1/accounts/current/members/${owner.userId}`,
            as(admin)
          )
          assert.strictEqual(adminRemovesOwner.status, 403)

          // With a second owner, the first may step down.
          const promoted = yield* api("PATCH", `/v1/accounts/current/members/${admin.userId}`, {
            ...as(owner),
            body: { role: "owner" }
          })
          assert.deepInclude(promoted.json.member, { role: "owner", owner: true })
          const stepDown = yield* api("PATCH", `/v1/accounts/current/members/${owner.userId}`, {
            ...as(owner),
            body: { role: "viewer" }
          })
          assert.strictEqual(stepDown.json.member.role, "viewer")
          // A viewer reads but cannot write.
          assert.strictEqual((yield* api("GET", "/v1/sessions", as(owner))).status, 200)
          assert.strictEqual((yield* api("POST", "/v1/sessions", { ...as(owner), body: {} })).status, 403)

          // A member's key in the org stops working when they leave.
          const memberKey = yield* api("POST", "/v1/keys", { ...as(member), body: { name: "mine" } })
          assert.strictEqual((yield* api("GET", "/v1/sessions", { key: memberKey.json.secret })).status, 200)
          const left = yield* api("DELETE", `/v1/accounts/current/members/${member.userId}`, as(member))
          assert.strictEqual(left.status, 204)
          assert.strictEqual((yield* api("GET", "/v1/sessions", { key: memberKey.json.secret })).status, 401)
          const gone = yield* api("GET", "/v1/accounts/current", as(member))
          assert.deepStrictEqual([gone.status, gone.json.error.code], [404, "account_not_found"])
          const unknown = yield* api("DELETE", `/v1/accounts/current/members/${member.userId}`, as(admin))
          assert.deepStrictEqual([unknown.status, unknown.json.error.code], [404, "member_not_found"])
        })
      )

      it.effect(
        "no way up: an admin cannot make themselves owner nor rotate another's key into their hands",
        () =>
          Effect.gen(function* () {
            const owner = yield* newUser
            const admin = yield* newUser
            const org = yield* createOrg(owner.cookie)
            const as = (who: { cookie: string }) => ({
              cookie: who.cookie,
              headers: { "x-service-account": org.id }
            })
            yield* api("POST", "/v1/accounts/current/members", {
              ...as(owner),
              body: { email: admin.email, role: "admin" }
            })

            const selfPromote = yield* api("PATCH", `/v1/accounts/current/members/${admin.userId}`, {
              ...as(admin),
              body: { role: "owner" }
            })
            assert.strictEqual(selfPromote.status, 403)

            // The owner's key in the org: the admin sees it and may revoke it, but not rotate it,
            // which would hand the admin a new secret acting as the owner.
            const ownerKey = yield* api("POST", "/v1/keys", { ...as(owner), body: { name: "owner's" } })
            const listed = yield* api("GET", "/v1/keys", as(admin))
            assert.include(
              listed.json.keys.map((k: any) => k.id),
              ownerKey.json.id
            )
            const stolen = yield* api("POST", `/v1/keys/${ownerKey.json.id}/rotate`, {
              ...as(admin),
              body: {}
            })
            assert.deepStrictEqual([stolen.status, stolen.json.error.code], [403, "forbidden"])
            assert.strictEqual((yield* api("GET", "/v1/sessions", { key: ownerKey.json.secret })).status, 200)
            // Its own maker rotates it.
            const rotated = yield* api("POST", `/v1/keys/${ownerKey.json.id}/rotate`, {
              ...as(owner),
              body: {}
            })
            assert.strictEqual(rotated.status, 200, rotated.text)
          })
      )

      it.effect(
        "no way wider: a scoped key rotates only within its scopes; keys never mint service-account keys",
        () =>
          Effect.gen(function* () {
            const alice = yield* newUser
            // alice.key has full access; a key scoped to keys.write must not turn it into a fresh secret.
            const manager = yield* api("POST", "/v1/keys", {
              cookie: alice.cookie,
              body: { name: "manager", scopes: ["keys.read", "keys.write"] }
            })
            const widened = yield* api("POST", `/v1/keys/${alice.keyId}/rotate`, {
              key: manager.json.secret,
              body: {}
            })
            assert.deepStrictEqual([widened.status, widened.json.error.code], [403, "forbidden"])
            // Within its scopes it may: it rotates itself.
            const self = yield* api("POST", `/v1/keys/${manager.json.id}/rotate`, {
              key: manager.json.secret,
              body: { grace_days: 0 }
            })
            assert.strictEqual(self.status, 200, self.text)
            assert.deepStrictEqual(self.json.scopes, ["keys.read", "keys.write"])

            // A full-access key may not create service accounts or mint their keys: a leaked key cannot mint more.
            const org = yield* createOrg(alice.cookie)
            const orgKey = yield* api("POST", "/v1/keys", {
              cookie: alice.cookie,
              headers: { "x-service-account": org.id },
              body: { name: "full" }
            })
            const viaKey = yield* api("POST", "/v1/accounts/current/service-accounts", {
              key: orgKey.json.secret,
              body: { name: "robot", role: "admin" }
            })
            assert.strictEqual(viaKey.status, 403)
            const robot = yield* api("POST", "/v1/accounts/current/service-accounts", {
              cookie: alice.cookie,
              headers: { "x-service-account": org.id },
              body: { name: "robot", role: "admin" }
            })
            assert.strictEqual(robot.status, 201, robot.text)
            const minted = yield* api(
              "POST",
              `/v1/accounts/current/service-accounts/${robot.json.service_account.id}/keys`,
              {
                key: orgKey.json.secret,
                body: { name: "robot key" }
              }
            )
            assert.strictEqual(minted.status, 403)
            // An access token is a person, but not the cookie: it mints no keys either.
            const token = yield* api("POST", "/auth/token", { cookie: alice.cookie })
            const byToken = yield* api("POST", "/v1/keys", {
              key: token.json.access_token,
              body: { name: "t" }
            })
            assert.strictEqual(byToken.status, 403)
          })
      )

      it.effect("a scoped key stays in its scopes: no member list, no leaving the account", () =>
        Effect.gen(function* () {
          const owner = yield* newUser
          const member = yield* newUser
          const org = yield* createOrg(owner.cookie)
          yield* api("POST", "/v1/accounts/current/members", {
            cookie: owner.cookie,
            headers: { "x-service-account": org.id },
            body: { email: member.email }
          })
          const scoped = yield* api("POST", "/v1/keys", {
            cookie: member.cookie,
            headers: { "x-service-account": org.id },
            body: { name: "reader", scopes: ["sessions.read"] }
          })
          assert.strictEqual((yield* api("GET", "/v1/sessions", { key: scoped.json.secret })).status, 200)
          assert.strictEqual(
            (yield* api("GET", "/v1/accounts/current", { key: scoped.json.secret })).status,
            200
          )
          const members = yield* api("GET", "/v1/accounts/current/members", { key: scoped.json.secret })
          assert.strictEqual(members.status, 403)
          const leave = yield* api("DELETE", `/v1/accounts/current/members/${member.userId}`, {
            key: scoped.json.secret
          })
          assert.strictEqual(leave.status, 403)
          assert.strictEqual((yield* api("GET", "/v1/sessions", { key: scoped.json.secret })).status, 200)
        })
      )

      it.effect("refuses members in a personal account", () =>
        Effect.gen(function* () {
          const alice = yield* newUser
          const bob = yield* newUser
          const response = yield* api("POST", "/v1/accounts/current/members", {
            cookie: alice.cookie,
            body: { email: bob.email }
          })
          assert.deepStrictEqual([response.status, response.json.error.code], [409, "personal_account"])
        })
      )
    })

    describe("service accounts", () => {
      it.effect("their keys act as the service account and survive the maker leaving", () =>
        Effect.gen(function* () {
          const owner = yield* newUser
          const maker = yield* newUser
          const org = yield* createOrg(owner.cookie)
          const as = (who: { cookie: string }) => ({
            cookie: who.cookie,
            headers: { "x-service-account": org.id }
          })
          yield* api("POST", "/v1/accounts/current/members", {
            ...as(owner),
            body: { email: maker.email, role: "admin" }
          })

          const created = yield* api("POST", "/v1/accounts/current/service-accounts", {
            ...as(maker),
            body: { name: "ci", role: "member" }
          })
          assert.strictEqual(created.status, 201, created.text)
          const said = created.json.service_account.id
          assert.deepInclude(created.json.service_account, {
            name: "ci",
            role: "member",
            created_by: maker.userId
          })
          const ownerRole = yield* api("POST", "/v1/accounts/current/service-accounts", {
            ...as(maker),
            body: { name: "boss", role: "owner" }
          })
          assert.strictEqual(ownerRole.status, 400)

          const key = yield* api("POST", `/v1/accounts/current/service-accounts/${said}/keys`, {
            ...as(maker),
            body: { name: "deploy" }
          })
          assert.strictEqual(key.status, 201, key.text)
          assert.strictEqual(key.json.service_account_id, said)
          const secret = key.json.secret
          const listed = yield* api("GET", `/v1/accounts/current/service-accounts/${said}/keys`, as(owner))
          assert.deepStrictEqual(
            listed.json.keys.map((k: any) => k.id),
            [key.json.id]
          )
          // It acts with the service account's role: a member, not the admin who made it.
          assert.strictEqual((yield* api("GET", "/v1/sessions", { key: secret })).status, 200)
          assert.strictEqual((yield* api("GET", "/v1/accounts/current/members", { key: secret })).status, 200)
          assert.strictEqual(
            (yield* api("GET", "/v1/accounts/current/service-accounts", { key: secret })).status,
            403
          )
          const current = yield* api("GET", "/v1/accounts/current", { key: secret })
          assert.deepInclude(current.json.account, { id: org.id, role: "member" })

          // The maker leaves: the service account's key still works.
          yield* api("DELETE", `/v1/accounts/current/members/${maker.userId}`, as(owner))
          assert.strictEqual((yield* api("GET", "/v1/sessions", { key: secret })).status, 200)

          // Its actions are the service account's in the audit trail.
          const sql = yield* SqlClient.SqlClient
          yield* api("POST", "/v1/ssh-keys", {
            key: secret,
            body: {
              public_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH2UbkEcoX02Pl4v6e/mq5wGpAMxmcDBQ9s844zb3C1F"
            }
          })
          const [event] = yield* sql<{ actor_type: string; actor_id: string }>`
            SELECT actor_type, actor_id FROM audit_events WHERE account_id = ${org.id} AND action = 'ssh_key.added'`
          assert.deepStrictEqual({ ...event }, { actor_type: "service_account", actor_id: said })

          // Deleting the service account revokes its keys at once.
          const deleted = yield* api("DELETE", `/v1/accounts/current/service-accounts/${said}`, as(owner))
          assert.strictEqual(deleted.status, 204)
          assert.strictEqual((yield* api("GET", "/v1/sessions", { key: secret })).status, 401)
          const again = yield* api("DELETE", `/v1/accounts/current/service-accounts/${said}`, as(owner))
          assert.deepStrictEqual([again.status, again.json.error.code], [404, "service_account_not_found"])
        })
      )
    })
  }
)
