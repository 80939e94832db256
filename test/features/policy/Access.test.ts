import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as Fs from "node:fs"
import WebSocket from "ws"
import { Api } from "../../../src/edge/http/Api.ts"
import { CREDENTIALS_LABEL, type RouteRow } from "../../../src/features/policy/Access.ts"
import { RAW, RAW_ROUTES, type RawRoute, routeTable } from "../../../src/edge/guard/RawRoutes.ts"
import { SCOPES } from "../../../src/kernel/Owner.ts"
import { request, type RequestOptions, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

const api = (method: string, path: string, options?: RequestOptions) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

const ROUTES = routeTable(Api)

/** The status of a WebSocket upgrade to the CDP relay or a page's (101 when it opens). */
const upgradeStatus = (baseUrl: string, path: string, key: string) =>
  Effect.promise(
    () =>
      new Promise<number>((resolve) => {
        const socket = new WebSocket(`${baseUrl.replace(/^http/, "ws")}${path}`, {
          headers: { authorization: `Bearer ${key}` }
        })
        socket.on("unexpected-response", (_request, response) => {
          resolve(response.statusCode ?? 0)
          socket.terminate()
        })
        socket.on("open", () => {
          resolve(101)
          socket.close()
        })
        socket.on("error", () => resolve(0))
      })
  )

/** Bodies that pass validation, so a lookup (and its 404) is what answers. */
const VALID_BODIES: Record<string, unknown> = {
  "/v1/accounts/current/members/{uid}": { role: "member" },
  "/v1/accounts/current/service-accounts/{said}/keys": { name: "x" },
  "/v1/sessions/{id}/resize": { cols: 800, rows: 600 },
  "/v1/sessions/{id}/exec": { command: "true" },
  "/v1/sessions/{id}/files/mkdir": { path: "/root/x" },
  "/v1/sessions/{id}/files/move": { from: "/root/x", to: "/root/y" },
  "/v1/sessions/{id}/files/watches": { path: "/root" },
  "/v1/sessions/{id}/computer": { actions: [{ type: "cursor_position" }] },
  "/v1/assistants/{id}/runtime-state": { state: {} },
  "/v1/assistants/{id}/channels": { kind: "webhook", name: "x" },
  "/v1/assistants/{id}/usage-events": { model: "m", input_tokens: 1, output_tokens: 1 },
  "/v2/assistants/{id}/config-intents": { patch: { model: "m" } }
}

/** Calls a route of the table with a credential; the path's `{params}` filled by `fill`. */
const call = (row: RouteRow, path: string, credential: { key?: string; cookie?: string }) =>
  Effect.gen(function* () {
    const service = yield* TestService.TestService
    if (row.path === "/sessions/{id}" || row.path.startsWith("/sessions/{id}/devtools/"))
      return yield* upgradeStatus(service.baseUrl, path, credential.key ?? "")
    const body =
      row.method === "POST" || row.method === "PATCH" || row.method === "PUT"
        ? (VALID_BODIES[row.path] ?? {})
        : undefined
    const response = yield* api(row.method, path, { ...credential, ...(body === undefined ? {} : { body }) })
    return response.status
  })

layer(TestService.layer({ browserPoolSize: 0, signupCreditUsd: 0 }), { excludeTestServices: true })(
  "route access",
  (it) => {
    it.effect("every route behind Authorize declares what it requires", () =>
      Effect.sync(() => {
        const missing = ROUTES.filter((row) => row.access === undefined).map(
          (row) => `${row.method} ${row.path}`
        )
        assert.deepStrictEqual(missing, [])
        assert.isAtLeast(ROUTES.length, 30)
      })
    )

    it.effect("the docs' route table lists every row of the table the middleware enforces", () =>
      Effect.sync(() => {
        const page = Fs.readFileSync("docs/reference/access.md", "utf8")
        const missing = ROUTES.filter((row) => {
          const permission = row.access!.permission === null ? "any member" : `\`${row.access!.permission}\``
          const audit = row.access!.audit === null ? "" : `\`${row.access!.audit.action}\``
          const credentials = CREDENTIALS_LABEL[row.access!.credentials].replace(/[()]/g, "\\$&")
          return !new RegExp(
            `\\| \`${row.method} ${row.path.replace(/[{}*]/g, "\\$&")}\` +\\| ${permission} +\\| ${credentials} +\\| ${audit} +\\|`
          ).test(page)
        }).map((row) => `${row.method} ${row.path}`)
        assert.deepStrictEqual(missing, [])
      })
    )

    it.effect(
      "every mutating route names its audit action, except the few that change nothing to audit",
      () =>
        Effect.sync(() => {
          // A screenshot reads the page, a self-test checks the runtime: they change nothing. The MCP
          // endpoint changes nothing itself: each tool's own route audits what it does.
          const unaudited = new Set([
            "POST /v1/sessions/{id}/screenshot",
            "POST /v1/sessions/{id}/self-test",
            // Input to a live page, as a CDP client's frames and the live view's input are: one row a
            // call would be the audit trail of an agent's every click (the connect is what is granted).
            "POST /v1/sessions/{id}/computer",
            "POST /v1/mcp",
            // The runtime's own state, written as often as it works: its data, not a change to audit.
            "PUT /v1/assistants/{id}/runtime-state",
            // A report of model use: data the runtime keeps sending, not a change of anything.
            "POST /v1/assistants/{id}/usage-events"
          ])
          const wrong = ROUTES.filter((row) => {
            const name = `${row.method} ${row.path}`
            const mutates = row.method !== "GET"
            return mutates !== unaudited.has(name) && mutates !== (row.access?.audit != null)
          }).map((row) => `${row.method} ${row.path}`)
          assert.deepStrictEqual(wrong, [])
          // Reads record nothing; a PTY's upgrade is a GET that starts a shell.
          const auditedReads = ROUTES.filter(
            (row) => row.method === "GET" && row.access?.audit != null && row.path !== "/v1/sessions/{id}/pty"
          )
          assert.deepStrictEqual(auditedReads, [])
          // An action names a resource and a verb.
          for (const row of ROUTES) {
            if (row.access?.audit) assert.match(row.access.audit.action, /^[a-z_]+\.[a-z_]+$/)
          }
        })
    )

    it.effect("OpenAPI carries each route's required access and audit action", () =>
      Effect.gen(function* () {
        const spec = (yield* api("GET", "/api-docs/openapi.json")).json
        const mismatched: Array<string> = []
        for (const row of ROUTES) {
          // A raw route's wildcard is the rest of the path, named `{path}` in the document.
          const path = RAW_ROUTES.includes(row as never) ? row.path.replace(/\*$/, "{path}") : row.path
          const operation = spec.paths[path]?.[row.method.toLowerCase()]
          const expected = {
            access: { permission: row.access!.permission, credentials: row.access!.credentials },
            audit: row.access!.audit?.action
          }
          const actual = { access: operation?.["x-required-access"], audit: operation?.["x-audit-action"] }
          if (JSON.stringify(actual) !== JSON.stringify(expected)) {
            mismatched.push(`${row.method} ${row.path}: ${JSON.stringify(actual)}`)
          }
        }
        assert.deepStrictEqual(mismatched, [])
        // A raw route's errors are documented from the same declaration its handler answers by.
        const undocumented: Array<string> = []
        for (const raw of Object.values(RAW) as ReadonlyArray<RawRoute>) {
          const operation = spec.paths[raw.path.replace(/\*$/, "{path}")]?.[raw.method.toLowerCase()]
          for (const error of raw.errors) {
            const body = operation?.responses?.[String(error.status)]?.content?.["application/json"]?.schema
            const { code, message } = body?.properties?.error?.properties ?? {}
            if (!code?.enum?.includes(error.code) || !message?.examples?.includes(error.message))
              undocumented.push(`${raw.method} ${raw.path} ${error.status} ${error.code}`)
          }
        }
        assert.deepStrictEqual(undocumented, [])
        assert.include(
          spec.paths["/v1/sessions/{id}/pty"].get.responses["429"].content["application/json"].schema
            .properties.error.properties.message.examples,
          "Too many requests."
        )
      })
    )

    describe("scope matrix", () => {
      it.effect("a key with one scope opens exactly that scope's routes (and those any member may use)", () =>
        Effect.gen(function* () {
          const user = yield* Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))
          const fill = (path: string) =>
            path.replace("{uid}", user.userId).replace(/\{[a-z_]+\}/g, "00000000-0000-4000-8000-000000000000")
          const failures: Array<string> = []
          for (const scope of SCOPES) {
            const created = yield* api("POST", "/v1/keys", {
              cookie: user.cookie,
              body: { name: scope, scopes: [scope] }
            })
            assert.strictEqual(created.status, 201, created.text)
            for (const row of ROUTES) {
              const access = row.access!
              const opens =
                (access.credentials === "any" ||
                  access.credentials === "any-or-assistant" ||
                  access.credentials === "cookie-or-scoped-key") &&
                (access.permission === null || access.permission === scope)
              const status = yield* call(row, fill(row.path), { key: created.json.secret })
              if (opens ? status === 403 || status === 401 : status !== 403) {
                failures.push(
                  `${scope}: ${row.method} ${row.path} -> ${status} (expected ${opens ? "open" : "403"})`
                )
              }
            }
          }
          assert.deepStrictEqual(failures, [])
        })
      )

      it.effect(
        "an access token opens the routes for any credential and for a person, never the cookie-only ones",
        () =>
          Effect.gen(function* () {
            const user = yield* Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))
            const minted = yield* api("POST", "/auth/token", { cookie: user.cookie })
            assert.strictEqual(minted.status, 200, minted.text)
            const fill = (path: string) =>
              path
                .replace("{uid}", user.userId)
                .replace(/\{[a-z_]+\}/g, "00000000-0000-4000-8000-000000000000")
            // Logging out everywhere ends the token itself: it goes last.
            const last = (row: RouteRow) => (row.path === "/auth/logout-everywhere" ? 1 : 0)
            const failures: Array<string> = []
            for (const row of [...ROUTES].sort((a, b) => last(a) - last(b))) {
              const opens =
                row.access!.credentials === "any" ||
                row.access!.credentials === "any-or-assistant" ||
                row.access!.credentials === "person"
              const status = yield* call(row, fill(row.path), { key: minted.json.access_token })
              if (opens ? status === 403 || status === 401 : status !== 403) {
                failures.push(`${row.method} ${row.path} -> ${status}`)
              }
            }
            assert.deepStrictEqual(failures, [])
          })
      )

      it.effect("a full-access key opens every route but the person-only and key-management ones", () =>
        Effect.gen(function* () {
          const user = yield* Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))
          const fill = (path: string) =>
            path.replace("{uid}", user.userId).replace(/\{[a-z_]+\}/g, "00000000-0000-4000-8000-000000000000")
          const failures: Array<string> = []
          for (const row of ROUTES) {
            const opens = row.access!.credentials === "any" || row.access!.credentials === "any-or-assistant"
            const status = yield* call(row, fill(row.path), { key: user.key })
            if (opens ? status === 403 || status === 401 : status !== 403) {
              failures.push(`${row.method} ${row.path} -> ${status}`)
            }
          }
          assert.deepStrictEqual(failures, [])
        })
      )

      it.effect("rejects unknown or empty scopes and modes at key creation", () =>
        Effect.gen(function* () {
          const user = yield* Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))
          for (const body of [
            { name: "x", scopes: ["sessions.read", "root"] },
            { name: "x", scopes: [] },
            { name: "x", mode: "prod" }
          ]) {
            const response = yield* api("POST", "/v1/keys", { cookie: user.cookie, body })
            assert.strictEqual(response.status, 400, JSON.stringify(body))
            assert.strictEqual(response.json.error.code, "invalid_field")
          }
          // A scoped key may mint keys only within its own scopes.
          const manager = yield* api("POST", "/v1/keys", {
            cookie: user.cookie,
            body: { name: "manager", scopes: ["keys.write", "sessions.read"] }
          })
          const wider = yield* api("POST", "/v1/keys", {
            key: manager.json.secret,
            body: { name: "wider", scopes: ["sessions.write"] }
          })
          assert.strictEqual(wider.status, 400)
          const full = yield* api("POST", "/v1/keys", { key: manager.json.secret, body: { name: "full" } })
          assert.strictEqual(full.status, 400)
          const narrower = yield* api("POST", "/v1/keys", {
            key: manager.json.secret,
            body: { name: "narrower", scopes: ["sessions.read"], mode: "test" }
          })
          assert.strictEqual(narrower.status, 201)
          assert.match(narrower.json.secret, /^svc_test_/)
          assert.deepStrictEqual(narrower.json.scopes, ["sessions.read"])
        })
      )
    })

    it.effect(
      "tenant isolation: account B's credentials on account A's ids are 404 on every route that takes one",
      () =>
        Effect.gen(function* () {
          const service = yield* TestService.TestService
          const sql = yield* SqlClient.SqlClient
          const a = yield* signUp(service.baseUrl)
          const b = yield* signUp(service.baseUrl)
          const [account] = yield* sql<{
            id: string
          }>`SELECT account_id AS id FROM api_keys WHERE id = ${a.keyId}`
          const sessionId = "sess_00000000-0000-4000-8000-00000000000a"
          yield* sql`
          INSERT INTO sessions (id, account_id, api_key_id, status, profile, device, ttl_seconds, region, node_id, created_at, expires_at, ended_at, ended_reason)
          VALUES (${sessionId}, ${account!.id}, ${a.keyId}, 'closed', 'default', '', 60, 'local', 'elsewhere', now(), now(), now(), 'client_delete')`
          const org = yield* api("POST", "/v1/accounts/organizations", {
            cookie: a.cookie,
            body: { name: `iso-${a.userId.slice(0, 8)}` }
          })
          const inOrg = { cookie: a.cookie, headers: { "x-service-account": org.json.account.id } }
          const sa = yield* api("POST", "/v1/accounts/current/service-accounts", {
            ...inOrg,
            body: { name: "sa" }
          })
          const saKey = yield* api(
            "POST",
            `/v1/accounts/current/service-accounts/${sa.json.service_account.id}/keys`,
            {
              ...inOrg,
              body: { name: "k" }
            }
          )
          const ssh = yield* api("POST", "/v1/ssh-keys", {
            key: a.key,
            body: {
              public_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH2UbkEcoX02Pl4v6e/mq5wGpAMxmcDBQ9s844zb3C1F"
            }
          })
          const topup = yield* api("POST", "/v1/billing/checkout", {
            cookie: a.cookie,
            body: { amount_usd: 10 }
          })
          assert.deepStrictEqual([sa.status, saKey.status, ssh.status, topup.status], [201, 201, 200, 201])
          // A webhook of A's with one delivery (written directly: no receiver is needed here).
          const webhookId = "wh_00000000-0000-4000-8000-00000000000a"
          const deliveryId = "whd_00000000-0000-4000-8000-00000000000a"
          yield* sql`
            INSERT INTO webhooks (id, account_id, url, events, secret_ciphertext, secret_preview, created_at, updated_at)
            VALUES (${webhookId}, ${account!.id}, 'https://example.invalid/hook', '{session.ready}', 'v1:x', 'whsec_x...', now(), now())`
          yield* sql`
            INSERT INTO webhook_events (id, account_id, type, data, created_at)
            VALUES ('evt_iso', ${account!.id}, 'session.ready', '{}'::jsonb, now())`
          yield* sql`
            INSERT INTO webhook_deliveries (id, webhook_id, event_id, account_id, event_type, state, created_at, updated_at)
            VALUES (${deliveryId}, ${webhookId}, 'evt_iso', ${account!.id}, 'session.ready', 'discarded', now(), now())`

          // A finished job of A's (failed: no engine picks it up).
          const jobId = "job_00000000-0000-4000-8000-00000000000a"
          yield* sql`
            INSERT INTO jobs (id, account_id, owner, kind, input, state, attempt_limit, created_at, updated_at)
            VALUES (${jobId}, ${account!.id}, '{}'::jsonb, 'exec', '{}'::jsonb, 'failed', 3, now(), now())`

          // A workspace of A's with a snapshot (rows only: nothing reads the disk for a 404).
          const workspaceId = "00000000-0000-4000-8000-00000000000a"
          yield* sql`
            INSERT INTO workspaces (id, account_id, name, created_at, updated_at)
            VALUES (${workspaceId}, ${account!.id}, 'iso', now(), now())`
          yield* sql`
            INSERT INTO workspace_snapshots (id, workspace_id, account_id, name, blob_key, used_bytes, created_at)
            VALUES (${workspaceId}, ${workspaceId}, ${account!.id}, 'snap', 'workspaces/x', 1, now())`

          // An extension of A's (its row alone: nothing reads the blob for a 404).
          const extensionId = "ext_0000000000004000800000000000000a"
          yield* sql`
            INSERT INTO extensions (id, account_id, name, version, manifest_version, files, bytes, sha256, created_at)
            VALUES (${extensionId}, ${account!.id}, 'iso', '1.0', 3, 1, 1, 'x', now())`

          // An image of A's, failed (its row alone: nothing pulls or reads a blob for a 404).
          const imageId = "img_0000000000004000800000000000000a"
          yield* sql`
            INSERT INTO images (id, account_id, name, reference, status, created_at)
            VALUES (${imageId}, ${account!.id}, 'iso', 'docker://registry.invalid/iso:latest', 'failed', now())`

          // An assistant of A's, paused (no runtime is started for it).
          const assistantId = "00000000-0000-4000-8000-0000000000aa"
          yield* sql`
            INSERT INTO assistants (id, account_id, name, status, workspace_id, created_at, updated_at)
            VALUES (${assistantId}, ${account!.id}, 'iso', 'paused', ${workspaceId}, now(), now())`

          const idFor = (path: string, param: string): string | undefined => {
            switch (param) {
              case "id":
                return path.startsWith("/v1/sessions") ||
                  path.startsWith("/sessions") ||
                  path.startsWith("/s/")
                  ? sessionId
                  : path.startsWith("/v1/ssh-keys")
                    ? ssh.json.key.id
                    : path.startsWith("/v1/extensions")
                      ? extensionId
                      : path.startsWith("/v1/images")
                        ? imageId
                        : path.startsWith("/billing/checkout")
                          ? topup.json.id
                          : path.startsWith("/v1/webhooks")
                            ? webhookId
                            : path.startsWith("/v1/jobs")
                              ? jobId
                              : path.startsWith("/v1/assistants") || path.startsWith("/v2/assistants")
                                ? assistantId
                                : undefined
              case "key_id":
                return a.keyId
              case "uid":
                return a.userId
              case "said":
                return sa.json.service_account.id
              case "kid":
                return saKey.json.id
              case "did":
                return deliveryId
              case "cid":
                return "cmd_00000000-0000-4000-8000-00000000000a"
              case "wid":
                return "fw_AAAAAAAAAAAAAAAA"
              case "bid":
                return "00000000-0000-4000-8000-0000000000bb"
              case "rid":
                return "00000000-0000-4000-8000-0000000000cc"
              case "target_id":
                return "0000000000000000000000000000000A"
              case "port":
                return "8000"
              case "workspace":
                return workspaceId
              case "name":
                return "snap"
            }
            return undefined
          }
          const failures: Array<string> = []
          let checked = 0
          for (const row of ROUTES.filter((r) => r.path.includes("{"))) {
            let path = row.path
            for (const [, param] of row.path.matchAll(/\{([a-z_]+)\}/g)) {
              const id = idFor(row.path, param!)
              if (id === undefined) {
                failures.push(`${row.method} ${row.path}: no id of A for {${param}}; add it to this test`)
                continue
              }
              path = path.replace(`{${param}}`, id)
            }
            const credential =
              row.access!.credentials === "any" || row.access!.credentials === "any-or-assistant"
                ? { key: b.key }
                : { cookie: b.cookie }
            const status = yield* call(row, path, credential)
            checked++
            if (status !== 404) failures.push(`${row.method} ${row.path} -> ${status}`)
          }
          assert.deepStrictEqual(failures, [])
          assert.isAtLeast(checked, 15)
        })
    )
  }
)
