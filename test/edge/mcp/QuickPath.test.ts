import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request, signUp } from "../../support/Client.ts"
import { mcpPost } from "../../support/Mcp.ts"
import * as TestService from "../../support/TestService.ts"

const MISSING = "sess_00000000-0000-4000-8000-000000000000"

layer(TestService.layer({ browserPoolSize: 1 }), { excludeTestServices: true })(
  "the MCP endpoint's quick path",
  (it) => {
    const baseUrl = Effect.map(TestService.TestService, (service) => service.baseUrl)

    /** One JSON-RPC POST with the key, in a session when its headers are given. */
    const post = (url: string, key: string, message: object, headers: Record<string, string> = {}) =>
      mcpPost(url, key, JSON.stringify(message), headers)

    /** A session opened by hand: `initialize`, then `notifications/initialized`. */
    const open = (url: string, key: string) =>
      Effect.gen(function* () {
        const initialized = yield* post(url, key, {
          jsonrpc: "2.0",
          id: 0,
          method: "initialize",
          params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } }
        })
        assert.strictEqual(initialized.status, 200)
        const session = initialized.headers.get("mcp-session-id")!
        const headers = { "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" }
        const notified = yield* post(
          url,
          key,
          { jsonrpc: "2.0", method: "notifications/initialized" },
          headers
        )
        assert.strictEqual(notified.status, 202)
        return headers
      })

    const getSession = (id: string, meta?: object) => ({
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: {
        name: "sessions_get",
        arguments: { session_id: id },
        ...(meta === undefined ? {} : { _meta: meta })
      }
    })

    it.effect("answers a read tool as the MCP server's own path and the REST route do", () =>
      Effect.gen(function* () {
        const url = yield* baseUrl
        const { key } = yield* signUp(url)
        const headers = yield* open(url, key)
        // Made by the tool: it answers with the session's whole record, as its GET route writes it.
        const made = yield* post(
          url,
          key,
          { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "sessions_create", arguments: {} } },
          headers
        )
        const session = made.json.result.structuredContent
        assert.strictEqual(session.status, "ready", JSON.stringify(made.json))
        const asRest = yield* request(url, "GET", `/v1/sessions/${session.id}`, { key })
        assert.deepStrictEqual(Object.keys(session).sort(), Object.keys(asRest.json).sort())
        assert.strictEqual(session.session_type, "browser")

        // The quick path; and the server's path, which a progress token takes.
        const quick = yield* post(url, key, getSession(session.id), headers)
        const server = yield* post(url, key, getSession(session.id, { progressToken: "p" }), headers)
        assert.strictEqual(quick.status, 200)
        assert.strictEqual(quick.headers.get("content-type"), "application/json")
        assert.strictEqual(quick.headers.get("mcp-protocol-version"), "2025-11-25")
        assert.strictEqual(quick.headers.get("x-ratelimit-scope"), "principal")
        // The same bytes as the server writes (its fields' order, its closing newline).
        assert.strictEqual(quick.text, server.text)
        assert.isTrue(quick.text.endsWith("}\n"))
        assert.strictEqual(quick.headers.get("content-length"), server.headers.get("content-length"))
        // The record is the REST route's, byte for byte.
        const rest = yield* request(url, "GET", `/v1/sessions/${session.id}`, { key })
        assert.strictEqual(quick.json.result.content[0].text, rest.text)
        assert.deepStrictEqual(quick.json.result.structuredContent, rest.json)

        // Every other read it answers, as the server's path answers it.
        const reads: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
          ["sessions_list", { limit: 5 }],
          ["workspaces_list", {}],
          ["jobs_get", { job_id: "job_00000000-0000-4000-8000-000000000000" }]
        ]
        for (const [name, args] of reads) {
          const read = (meta?: object) => ({
            jsonrpc: "2.0",
            id: 9,
            method: "tools/call",
            params: { name, arguments: args, ...(meta === undefined ? {} : { _meta: meta }) }
          })
          const onQuick = yield* post(url, key, read(), headers)
          const onServer = yield* post(url, key, read({ progressToken: name }), headers)
          assert.strictEqual(onQuick.text, onServer.text, name)
        }
        const listed = yield* post(
          url,
          key,
          { ...getSession(session.id), params: { name: "sessions_list", arguments: {} } },
          headers
        )
        const listedByRest = yield* request(url, "GET", "/v1/sessions", { key })
        assert.strictEqual(listed.json.result.content[0].text, listedByRest.text)

        // A refusal, and bad arguments, alike on both paths.
        const missing = yield* post(url, key, getSession(MISSING), headers)
        assert.deepStrictEqual(missing.json.result.structuredContent, {
          error: { code: "session_not_found", message: "Session not found." },
          status: 404
        })
        const missingOnServer = yield* post(url, key, getSession(MISSING, { progressToken: 1 }), headers)
        assert.strictEqual(missing.text, missingOnServer.text)
        const extra = {
          ...getSession(session.id),
          params: { name: "sessions_get", arguments: { session_id: 5 } }
        }
        const badQuick = yield* post(url, key, extra, headers)
        assert.strictEqual(badQuick.json.result.isError, true)
        const badOnServer = yield* post(
          url,
          key,
          { ...extra, params: { ...extra.params, _meta: { progressToken: 2 } } },
          headers
        )
        assert.strictEqual(badQuick.text, badOnServer.text)

        // What the server refuses, the quick path leaves to it: arguments that are no object, a `_meta`
        // of another shape, a media type refused by its quality.
        const nullArguments = yield* post(
          url,
          key,
          { ...getSession(session.id), params: { name: "sessions_get", arguments: null } },
          headers
        )
        assert.strictEqual(nullArguments.json.error.code, -32602)
        const oddMeta = yield* post(
          url,
          key,
          { ...getSession(session.id), params: { ...getSession(session.id).params, _meta: "x" } },
          headers
        )
        assert.strictEqual(oddMeta.json.error.code, -32602)
        const refusedType = yield* post(url, key, getSession(session.id), {
          ...headers,
          accept: "application/json, text/event-stream;q=0"
        })
        assert.strictEqual(refusedType.status, 406)
        // An id no route could name is the route's 404, not a failure.
        const nul = yield* post(
          url,
          key,
          { ...getSession(session.id), params: { name: "jobs_get", arguments: { job_id: "job_\u0000" } } },
          headers
        )
        assert.deepStrictEqual(nul.json.result.structuredContent, {
          error: { code: "job_not_found", message: "Job not found." },
          status: 404
        })

        // Another account's session is not found, on the quick path too.
        const other = yield* signUp(url)
        const otherHeaders = yield* open(url, other.key)
        const foreign = yield* post(url, other.key, getSession(session.id), otherHeaders)
        assert.strictEqual(foreign.json.result.structuredContent.error.code, "session_not_found")

        // A protocol header other than the session's is the server's 400; an ended MCP session a 404.
        const wrongVersion = yield* post(url, key, getSession(session.id), {
          ...headers,
          "mcp-protocol-version": "2025-06-18"
        })
        assert.strictEqual(wrongVersion.status, 400)
        const ended = yield* Effect.promise(() =>
          fetch(`${url}/v1/mcp`, {
            method: "DELETE",
            headers: { authorization: `Bearer ${key}`, ...headers }
          })
        )
        assert.strictEqual(ended.status, 204)
        const afterEnd = yield* post(url, key, getSession(session.id), headers)
        assert.strictEqual(afterEnd.status, 404)
        yield* request(url, "DELETE", `/v1/sessions/${session.id}`, { key })
      })
    )

    it.effect("refuses a read tool to a key whose scopes do not hold the route's", () =>
      Effect.gen(function* () {
        const url = yield* baseUrl
        const user = yield* signUp(url)
        const created = yield* request(url, "POST", "/v1/keys", {
          cookie: user.cookie,
          body: { name: "workspaces only", scopes: ["workspaces.read"] }
        })
        assert.strictEqual(created.status, 201, created.text)
        const key = created.json.secret
        const headers = yield* open(url, key)
        const refused = yield* post(url, key, getSession(MISSING), headers)
        assert.deepStrictEqual(refused.json.result.structuredContent, {
          error: { code: "forbidden", message: "Access denied." },
          status: 403
        })
      })
    )
  }
)
