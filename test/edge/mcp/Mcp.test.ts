import { assert, layer } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect, Fiber, Option } from "effect"
import { PNG_SIGNATURE, request, signUp } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import { type McpAnswer, mcpPost } from "../../support/Mcp.ts"
import * as TestService from "../../support/TestService.ts"

const TOOL_NAMES = [
  "browser_click",
  "browser_computer",
  "browser_evaluate",
  "browser_navigate",
  "browser_screenshot",
  "browser_text",
  "browser_type",
  "files_list",
  "files_mkdir",
  "files_move",
  "files_read",
  "files_remove",
  "files_stat",
  "files_write",
  "jobs_create",
  "jobs_get",
  "sandbox_exec",
  "sessions_close",
  "sessions_create",
  "sessions_get",
  "sessions_list",
  "workspaces_create",
  "workspaces_list",
  "workspaces_snapshot"
]

const MISSING = "sess_00000000-0000-4000-8000-000000000000"

/** Each POST spends one; the rate-limit test spends a fresh principal's whole budget. */
const MCP_BUDGET = 60

layer(
  TestService.layer({
    browserPoolSize: 1,
    sandbox: { poolSize: 1 },
    limits: { mcpRequestsPerMinute: MCP_BUDGET }
  }),
  { excludeTestServices: true }
)("the MCP endpoint", (it) => {
  const baseUrl = Effect.map(TestService.TestService, (service) => service.baseUrl)

  /** The official SDK's client, connected over Streamable HTTP with `key`; closed with the scope. */
  const connect = (key: string) =>
    Effect.acquireRelease(
      Effect.gen(function* () {
        const url = new URL("/v1/mcp", yield* baseUrl)
        const transport = new StreamableHTTPClientTransport(url, {
          requestInit: { headers: { authorization: `Bearer ${key}` } }
        })
        const client = new Client({ name: "rbs-test", version: "1.0.0" })
        yield* Effect.promise(() => client.connect(transport))
        return { client, transport }
      }),
      ({ client, transport }) =>
        Effect.promise(() =>
          transport.terminateSession().then(
            () => client.close(),
            () => client.close()
          )
        )
    )

  const call = (client: Client, name: string, args: Record<string, unknown> = {}) =>
    Effect.promise(() => client.callTool({ name, arguments: args })).pipe(
      Effect.map((result: any) => ({
        result,
        record: result.structuredContent,
        text: result.content?.find((part: any) => part.type === "text")?.text as string | undefined
      }))
    )

  const ok = (name: string, answer: { result: any; text: string | undefined }) => {
    assert.notStrictEqual(answer.result.isError, true, `${name}: ${answer.text}`)
    assert.deepStrictEqual(
      JSON.parse(answer.text!),
      answer.result.structuredContent,
      "the text is the record's JSON"
    )
  }

  it.effect(
    "the SDK client lists the tools, drives a browser session and a sandbox, and closes both",
    () =>
      Effect.gen(function* () {
        const { key } = yield* Effect.flatMap(baseUrl, signUp)
        const page = yield* LocalPage.serve
        const { client } = yield* connect(key)
        assert.strictEqual(client.getServerVersion()?.name, "remote-browser-service")

        const { tools } = yield* Effect.promise(() => client.listTools())
        assert.deepStrictEqual(tools.map((tool) => tool.name).sort(), TOOL_NAMES)
        const navigate = tools.find((tool) => tool.name === "browser_navigate")!
        assert.strictEqual(navigate.inputSchema.type, "object")
        assert.includeMembers(navigate.inputSchema.required as Array<string>, ["session_id", "url"])

        const browser = yield* call(client, "sessions_create", { session_type: "browser", ttl_seconds: 300 })
        ok("sessions_create", browser)
        assert.strictEqual(browser.record.status, "ready")
        const id = browser.record.id as string

        const loaded = yield* call(client, "browser_navigate", { session_id: id, url: `${page}counter` })
        ok("browser_navigate", loaded)
        assert.deepStrictEqual(loaded.record, { url: `${page}counter`, status: 200, title: "counter" })

        const text = yield* call(client, "browser_text", { session_id: id })
        ok("browser_text", text)
        assert.include(text.record.text, "press")
        assert.strictEqual(text.record.truncated, false)

        ok("browser_click", yield* call(client, "browser_click", { session_id: id, selector: "#button" }))
        ok(
          "browser_type",
          yield* call(client, "browser_type", { session_id: id, selector: "#field", text: "hello" })
        )
        const state = yield* call(client, "browser_evaluate", {
          session_id: id,
          expression: "({ count: count.textContent, field: field.value })"
        })
        ok("browser_evaluate", state)
        assert.deepStrictEqual(state.record.value, { count: "1", field: "hello" })

        const missing = yield* call(client, "browser_click", { session_id: id, selector: "#nothing" })
        assert.isTrue(missing.result.isError)
        assert.strictEqual(missing.record.error.code, "element_not_found")
        const thrown = yield* call(client, "browser_evaluate", { session_id: id, expression: "nope()" })
        assert.isTrue(thrown.result.isError)
        assert.strictEqual(thrown.record.error.code, "evaluation_failed")
        assert.include(thrown.record.error.message, "nope is not defined")

        const shot = yield* call(client, "browser_screenshot", { session_id: id })
        ok("browser_screenshot", shot)
        const image = shot.result.content.find((part: any) => part.type === "image")
        assert.strictEqual(image.mimeType, "image/png")
        assert.deepStrictEqual([...Buffer.from(image.data, "base64").subarray(0, 8)], PNG_SIGNATURE)

        // A page Chromium cannot load (its egress proxy finds no such host) is the page's refusal.
        const unreachable = yield* call(client, "browser_navigate", {
          session_id: id,
          url: "https://unreachable.invalid/"
        })
        assert.isTrue(unreachable.result.isError)
        assert.strictEqual(unreachable.record.error.code, "navigation_failed")
        assert.match(
          unreachable.record.error.message,
          /^Loading https:\/\/unreachable\.invalid\/ failed: net::ERR_/
        )

        const sandbox = yield* call(client, "sessions_create", { session_type: "sandbox" })
        ok("sessions_create", sandbox)
        const sid = sandbox.record.id as string
        const ran = yield* call(client, "sandbox_exec", {
          session_id: sid,
          command: "echo hi from $(whoami)"
        })
        ok("sandbox_exec", ran)
        assert.strictEqual(ran.record.exit_code, 0)
        assert.strictEqual(ran.record.stdout, "hi from root\n")
        ok(
          "files_write",
          yield* call(client, "files_write", { session_id: sid, path: "notes/a.txt", content: "é ✓" })
        )
        const read = yield* call(client, "files_read", { session_id: sid, path: "/root/notes/a.txt" })
        ok("files_read", read)
        assert.deepStrictEqual(read.record, {
          path: "/root/notes/a.txt",
          size: 6,
          encoding: "utf8",
          content: "é ✓"
        })
        ok(
          "files_mkdir",
          yield* call(client, "files_mkdir", { session_id: sid, path: "notes/old/deeper", parents: true })
        )
        ok(
          "files_move",
          yield* call(client, "files_move", { session_id: sid, from: "notes/old", to: "notes/new" })
        )
        const listed = yield* call(client, "files_list", { session_id: sid, path: "notes" })
        ok("files_list", listed)
        assert.deepStrictEqual(
          listed.record.data.map((entry: { name: string; type: string }) => `${entry.name} ${entry.type}`),
          ["a.txt file", "new directory"]
        )
        const entry = yield* call(client, "files_stat", { session_id: sid, path: "notes/new/deeper" })
        ok("files_stat", entry)
        assert.strictEqual(entry.record.type, "directory")
        ok(
          "files_remove",
          yield* call(client, "files_remove", { session_id: sid, path: "notes/new", recursive: true })
        )
        const gone = yield* call(client, "files_stat", { session_id: sid, path: "notes/new" })
        assert.strictEqual(gone.record.error.code, "file_not_found")
        const onSandbox = yield* call(client, "browser_text", { session_id: sid })
        assert.strictEqual(onSandbox.record.error.code, "session_type_mismatch")

        for (const session of [id, sid])
          ok("sessions_close", yield* call(client, "sessions_close", { session_id: session }))
        const closed = yield* call(client, "sessions_get", { session_id: id })
        assert.strictEqual(closed.record.status, "closed")
        const again = yield* call(client, "sessions_close", { session_id: id })
        assert.isTrue(again.result.isError)
        assert.deepStrictEqual(again.record, {
          error: { code: "session_not_open", message: "Session is already in a terminal state." },
          status: 409
        })
      }),
    120_000
  )

  it.effect("a scoped key sees only the tools its scopes allow, and is refused the others", () =>
    Effect.gen(function* () {
      const url = yield* baseUrl
      const user = yield* signUp(url)
      const created = yield* request(url, "POST", "/v1/keys", {
        cookie: user.cookie,
        body: { name: "reader", scopes: ["sessions.read", "workspaces.read"] }
      })
      assert.strictEqual(created.status, 201, created.text)
      const { client } = yield* connect(created.json.secret)
      const { tools } = yield* Effect.promise(() => client.listTools())
      // Each tool's route decides: the screenshot route is a read, and the jobs routes leave it to the kind.
      assert.deepStrictEqual(tools.map((tool) => tool.name).sort(), [
        "browser_screenshot",
        "jobs_create",
        "jobs_get",
        "sessions_get",
        "sessions_list",
        "workspaces_list"
      ])
      const refused = yield* call(client, "sessions_create", {})
      assert.isTrue(refused.result.isError)
      assert.deepStrictEqual(refused.record, {
        error: { code: "forbidden", message: "Access denied." },
        status: 403
      })
      const driven = yield* call(client, "browser_text", {
        session_id: "sess_00000000-0000-4000-8000-000000000000"
      })
      assert.strictEqual(driven.record.error.code, "forbidden")
      const listed = yield* call(client, "sessions_list", { limit: 5 })
      assert.deepStrictEqual(listed.record.data, [])
      // The refused create is in the audit trail, as the REST route's refusal is.
      const events = yield* request(url, "GET", "/v1/audit/events?outcome=failure", { cookie: user.cookie })
      assert.strictEqual(events.status, 200, events.text)
      assert.isTrue(
        events.json.data.some(
          (event: any) => event.action === "session.created" && event.details?.code === "forbidden"
        ),
        events.text
      )
    })
  )

  it.effect("answers bad input with protocol errors and the API's error bodies, never a 500", () =>
    Effect.gen(function* () {
      const url = yield* baseUrl
      const user = yield* signUp(url)
      const key = user.key
      const post = (body: string, headers: Record<string, string> = {}) => mcpPost(url, key, body, headers)

      const unauthenticated = yield* post("{}", { authorization: "Bearer svc_test_nope" })
      assert.strictEqual(unauthenticated.status, 401)
      assert.deepStrictEqual(unauthenticated.json, {
        error: { code: "unauthorized", message: "Missing or invalid API key." }
      })
      const parse = yield* post("{not json")
      assert.isBelow(parse.status, 500)
      assert.strictEqual(parse.json.error.code, -32700)
      assert.strictEqual(parse.headers.get("x-ratelimit-scope"), "principal")

      const notRpc = yield* post(JSON.stringify({ hello: "world" }))
      assert.isBelow(notRpc.status, 500)
      assert.strictEqual(notRpc.json.error.code, -32600)

      // The transport's own refusals.
      const ping = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" })
      // Each refused in JSON-RPC, never with an empty body.
      const fromPage = yield* post(ping, { origin: "https://elsewhere.example" })
      assert.strictEqual(fromPage.status, 403)
      assert.strictEqual(fromPage.json.error.code, -32000)
      const jsonOnly = yield* post(ping, { accept: "application/json" })
      assert.strictEqual(jsonOnly.status, 406)
      assert.deepStrictEqual(jsonOnly.json, {
        jsonrpc: "2.0",
        id: null,
        error: {
          code: -32000,
          message: "Not Acceptable: the client must accept both application/json and text/event-stream"
        }
      })
      const sessionless = yield* post(ping)
      assert.strictEqual(sessionless.status, 400)
      assert.deepStrictEqual(sessionless.json.error, {
        code: -32600,
        message: "MCP-Session-Id header is required; send initialize to start a session",
        _tag: "InvalidRequest"
      })
      const unknownSession = yield* post(ping, { "mcp-session-id": "no-such-session" })
      assert.strictEqual(unknownSession.status, 404)
      assert.deepStrictEqual(unknownSession.json, {
        jsonrpc: "2.0",
        id: 1,
        error: { code: -32001, message: "Session not found" }
      })
      const empty = yield* post("[]")
      assert.strictEqual(empty.status, 400)
      assert.strictEqual(empty.json.error.code, -32600)
      const initialize = JSON.stringify({
        jsonrpc: "2.0",
        id: 2,
        method: "initialize",
        params: { protocolVersion: "2024-01-01", capabilities: {}, clientInfo: { name: "t", version: "1" } }
      })
      // An offer of a revision it does not serve gets its newest.
      const opened = yield* post(initialize)
      assert.strictEqual(opened.json.result.protocolVersion, "2025-11-25")
      // A session is its opener's alone: another tenant holding its id can neither use nor end it.
      const openedId = opened.headers.get("mcp-session-id")!
      const stranger = yield* signUp(url)
      const theirs = { "mcp-session-id": openedId, "mcp-protocol-version": "2025-11-25" }
      const borrowed = yield* mcpPost(url, stranger.key, ping, theirs)
      assert.strictEqual(borrowed.status, 404)
      assert.strictEqual(borrowed.json.error.code, -32001)
      const ended = yield* Effect.promise(() =>
        fetch(`${url}/v1/mcp`, {
          method: "DELETE",
          headers: { authorization: `Bearer ${stranger.key}`, ...theirs }
        })
      )
      assert.strictEqual(ended.status, 404)
      const stillMine = yield* post(ping, theirs)
      assert.strictEqual(stillMine.status, 200, stillMine.text)
      const again = yield* post(initialize, { "mcp-session-id": opened.headers.get("mcp-session-id")! })
      assert.strictEqual(again.status, 400)
      assert.strictEqual(again.json.error.message, "initialize must not include an MCP-Session-Id header")
      const noOffer = yield* post(JSON.stringify({ jsonrpc: "2.0", id: 3, method: "initialize", params: {} }))
      assert.deepStrictEqual(noOffer.json.error, { code: -32602, message: "Invalid method parameters" })
      assert.isNull(noOffer.headers.get("mcp-session-id"))

      const { client } = yield* connect(key)
      const unknownTool = yield* Effect.promise(() =>
        client.callTool({ name: "no_such_tool", arguments: {} }).then(
          () => assert.fail("an unknown tool answered"),
          (error: any) => error
        )
      )
      assert.strictEqual(unknownTool.code, -32602)
      // Arguments that do not fit a tool are its answer (isError), as MCP 2025-11-25 asks.
      const badArguments = yield* call(client, "browser_navigate", { session_id: "x", url: 5 })
      assert.isTrue(badArguments.result.isError)
      assert.deepStrictEqual(badArguments.record, {
        error: { code: "invalid_field", message: "Invalid value for field: url." },
        status: 400
      })
      const notHttp = yield* call(client, "browser_navigate", { session_id: "x", url: "file:///etc/passwd" })
      assert.strictEqual(notHttp.record.error.message, "Invalid value for field: url.")
      const extra = yield* call(client, "sessions_get", { session_id: "x", sneaky: true })
      assert.strictEqual(extra.record.error.code, "invalid_field")

      // Every POST is authenticated: a key revoked mid-session is refused at its next request.
      const revoked = yield* request(url, "DELETE", `/v1/keys/${user.keyId}`, { cookie: user.cookie })
      assert.isBelow(revoked.status, 300, revoked.text)
      const afterRevoke = yield* Effect.promise(() =>
        client.listTools().then(
          () => assert.fail("a revoked key listed the tools"),
          (error: any) => String(error)
        )
      )
      assert.include(afterRevoke, `"code":"unauthorized"`)
    })
  )

  /** One JSON-RPC POST with the key, in a session when its headers are given. */
  const post = (url: string, key: string, message: unknown, headers: Record<string, string> = {}) =>
    mcpPost(url, key, typeof message === "string" ? message : JSON.stringify(message), headers)

  /** A session opened by hand in `version`: `initialize`, then `notifications/initialized`. */
  const open = (url: string, key: string, version = "2025-11-25") =>
    Effect.gen(function* () {
      const initialized = yield* post(url, key, {
        jsonrpc: "2.0",
        id: 0,
        method: "initialize",
        params: { protocolVersion: version, capabilities: {}, clientInfo: { name: "t", version: "1" } }
      })
      assert.strictEqual(initialized.status, 200, initialized.text)
      assert.strictEqual(initialized.json.result.protocolVersion, version)
      const headers = {
        "mcp-session-id": initialized.headers.get("mcp-session-id")!,
        "mcp-protocol-version": version
      }
      const notified = yield* post(url, key, { jsonrpc: "2.0", method: "notifications/initialized" }, headers)
      assert.strictEqual(notified.status, 202)
      return headers
    })

  const toolCall = (name: string, args: unknown, id: number | string = 1) => ({
    jsonrpc: "2.0",
    id,
    method: "tools/call",
    params: { name, arguments: args }
  })

  it.effect(
    "a read tool answers its REST route's record to the byte, in each revision",
    () =>
      Effect.gen(function* () {
        const url = yield* baseUrl
        const { key } = yield* signUp(url)
        const headers = yield* open(url, key)
        const legacy = yield* open(url, key, "2025-03-26")
        // Made by the tool: it answers with the session's whole record, as its GET route writes it.
        const made = yield* post(url, key, toolCall("sessions_create", {}), headers)
        const session = made.json.result.structuredContent
        assert.strictEqual(session.status, "ready", made.text)
        const rest = yield* request(url, "GET", `/v1/sessions/${session.id}`, { key })
        assert.deepStrictEqual(Object.keys(session).sort(), Object.keys(rest.json).sort())

        const read = yield* post(url, key, toolCall("sessions_get", { session_id: session.id }, 7), headers)
        assert.strictEqual(read.status, 200)
        assert.strictEqual(read.headers.get("content-type"), "application/json")
        assert.strictEqual(read.headers.get("mcp-protocol-version"), "2025-11-25")
        assert.strictEqual(read.headers.get("x-ratelimit-scope"), "principal")
        assert.isTrue(read.text.endsWith("}\n"), "each message ends with a newline")
        // Written by hand around the record's JSON (serialized once for the text and the structured
        // content): the compact JSON of the message, key for key.
        assert.strictEqual(read.text, `${JSON.stringify(read.json)}\n`)
        assert.deepStrictEqual(Object.keys(read.json.result), ["content", "structuredContent"])
        const again = yield* request(url, "GET", `/v1/sessions/${session.id}`, { key })
        assert.strictEqual(read.json.id, 7)
        assert.strictEqual(read.json.result.content[0].text, again.text)
        assert.deepStrictEqual(read.json.result.structuredContent, again.json)
        // 2025-03-26 has no `structuredContent`: the record is the text alone.
        const readLegacy = yield* post(url, key, toolCall("sessions_get", { session_id: session.id }), legacy)
        assert.deepStrictEqual(Object.keys(readLegacy.json.result), ["content"])
        assert.strictEqual(readLegacy.text, `${JSON.stringify(readLegacy.json)}\n`)
        assert.deepStrictEqual(JSON.parse(readLegacy.json.result.content[0].text), again.json)

        const listed = yield* post(url, key, toolCall("sessions_list", {}), headers)
        const listedByRest = yield* request(url, "GET", "/v1/sessions", { key })
        assert.strictEqual(listed.json.result.content[0].text, listedByRest.text)
        const spaces = yield* post(url, key, toolCall("workspaces_list", {}), headers)
        const spacesByRest = yield* request(url, "GET", "/v1/workspaces", { key })
        assert.strictEqual(spaces.json.result.content[0].text, spacesByRest.text)

        // A refusal is the tool's answer with the route's status; after the content, `isError`.
        const missing = yield* post(url, key, toolCall("sessions_get", { session_id: MISSING }), headers)
        assert.deepStrictEqual(Object.keys(missing.json.result), ["content", "structuredContent", "isError"])
        assert.strictEqual(missing.text, `${JSON.stringify(missing.json)}\n`)
        assert.deepStrictEqual(missing.json.result.structuredContent, {
          error: { code: "session_not_found", message: "Session not found." },
          status: 404
        })
        const missingLegacy = yield* post(url, key, toolCall("sessions_get", { session_id: MISSING }), legacy)
        assert.deepStrictEqual(missingLegacy.json.result, {
          content: [
            {
              type: "text",
              text: JSON.stringify({ error: { code: "session_not_found", message: "Session not found." } })
            }
          ],
          isError: true
        })
        // An id no route could name is the route's 404, not a failure.
        const nul = yield* post(url, key, toolCall("jobs_get", { job_id: "job_\u0000" }), headers)
        assert.deepStrictEqual(nul.json.result.structuredContent, {
          error: { code: "job_not_found", message: "Job not found." },
          status: 404
        })
        // Arguments that are no object are the protocol's error; of the wrong shape, the tool's.
        const nullArguments = yield* post(url, key, toolCall("sessions_get", null), headers)
        assert.deepStrictEqual(nullArguments.json.error, {
          code: -32602,
          message: "Invalid method parameters"
        })
        const badArguments = yield* post(url, key, toolCall("sessions_get", { session_id: 5 }), headers)
        assert.strictEqual(badArguments.json.result.structuredContent.error.code, "invalid_field")

        // Another account cannot use this MCP session (its id is no one else's), and in a session of
        // its own, this account's browser session is not found.
        const other = yield* signUp(url)
        const foreign = yield* post(
          url,
          other.key,
          toolCall("sessions_get", { session_id: session.id }),
          headers
        )
        assert.strictEqual(foreign.status, 404)
        assert.strictEqual(foreign.json.error.code, -32001)
        const theirs = yield* open(url, other.key)
        const inTheirs = yield* post(
          url,
          other.key,
          toolCall("sessions_get", { session_id: session.id }),
          theirs
        )
        assert.strictEqual(inTheirs.json.result.structuredContent.error.code, "session_not_found")

        // From 2025-06-18 the revision a request names must be its session's; 2025-03-26 had no such header.
        const wrong = yield* post(url, key, toolCall("sessions_get", { session_id: session.id }), {
          ...headers,
          "mcp-protocol-version": "2025-06-18"
        })
        assert.strictEqual(wrong.status, 400)
        assert.strictEqual(wrong.json.error.code, -32020)
        const unknown = yield* post(
          url,
          key,
          { jsonrpc: "2.0", id: 1, method: "ping" },
          {
            ...headers,
            "mcp-protocol-version": "1999-01-01"
          }
        )
        assert.deepStrictEqual(unknown.json.error.data, {
          supported: ["2025-11-25", "2025-06-18", "2025-03-26"],
          requested: "1999-01-01"
        })
        const named = yield* post(
          url,
          key,
          { jsonrpc: "2.0", id: 1, method: "ping" },
          {
            ...legacy,
            "mcp-protocol-version": "2025-11-25"
          }
        )
        assert.strictEqual(named.headers.get("mcp-protocol-version"), "2025-03-26")
        assert.deepStrictEqual(named.json.result, {})

        // Batches, in 2025-03-26 alone: the requests' answers in their order, none for a notification.
        const batch = `[${JSON.stringify({ jsonrpc: "2.0", id: "p", method: "ping" })},${JSON.stringify({
          jsonrpc: "2.0",
          method: "notifications/initialized"
        })},${JSON.stringify(toolCall("sessions_get", { session_id: MISSING }, 2))}]`
        const batched = yield* post(url, key, batch, legacy)
        assert.strictEqual(batched.status, 200)
        assert.deepStrictEqual(
          batched.json.map((answer: any) => answer.id),
          ["p", 2]
        )
        assert.isTrue(batched.json[1].result.isError)
        const notHere = yield* post(url, key, batch, headers)
        assert.strictEqual(notHere.status, 400)
        assert.strictEqual(notHere.json.error.code, -32600)
        yield* request(url, "DELETE", `/v1/sessions/${session.id}`, { key })
      }),
    60_000
  )

  it.effect(
    "a cancel stops its call, a DELETE ends the session and its calls, and both are scoped to it",
    () =>
      Effect.gen(function* () {
        const url = yield* baseUrl
        const { key } = yield* signUp(url)
        const headers = yield* open(url, key)
        const made = yield* post(url, key, toolCall("sessions_create", {}), headers)
        const browser = made.json.result.structuredContent.id as string
        // A page's promise that never settles: the call would wait for ever.
        const forever = (id: number, session: Record<string, string>) =>
          post(
            url,
            key,
            toolCall("browser_evaluate", { session_id: browser, expression: "new Promise(() => {})" }, id),
            session
          )
        const cancel = (id: number, session: Record<string, string>) =>
          post(
            url,
            key,
            { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id } },
            session
          )
        /** The call's answer, if it comes within a second. */
        const settle = <A>(fiber: Fiber.Fiber<A>) => Fiber.join(fiber).pipe(Effect.timeoutOption("1 second"))

        const call = yield* Effect.forkChild(forever(41, headers))
        // A cancel of another id, or of this id from another session, stops nothing.
        const otherSession = yield* open(url, key)
        assert.strictEqual((yield* cancel(41, otherSession)).status, 202)
        assert.strictEqual((yield* cancel(42, headers)).status, 202)
        assert.isTrue(Option.isNone(yield* settle(call)), "the call still runs")
        let cancelled: Option.Option<McpAnswer> = Option.none()
        while (Option.isNone(cancelled)) {
          assert.strictEqual((yield* cancel(41, headers)).status, 202)
          cancelled = yield* settle(call)
        }
        // Its answer is never written: the response is an event stream that ends empty.
        assert.strictEqual(cancelled.value.status, 200)
        assert.strictEqual(cancelled.value.headers.get("content-type"), "text/event-stream")
        assert.strictEqual(cancelled.value.text, "")
        const alive = yield* post(url, key, { jsonrpc: "2.0", id: 2, method: "ping" }, headers)
        assert.deepStrictEqual(alive.json, { jsonrpc: "2.0", id: 2, result: {} })

        const ended = yield* Effect.forkChild(forever(43, otherSession))
        assert.isTrue(Option.isNone(yield* settle(ended)), "the call still runs")
        const deleted = yield* Effect.promise(() =>
          fetch(`${url}/v1/mcp`, {
            method: "DELETE",
            headers: { authorization: `Bearer ${key}`, ...otherSession }
          })
        )
        assert.strictEqual(deleted.status, 204)
        const endedCall = yield* Fiber.join(ended)
        assert.strictEqual(endedCall.status, 404)
        assert.strictEqual(endedCall.json.id, 43)
        assert.strictEqual(endedCall.json.error.code, -32001)
        const afterEnd = yield* post(url, key, { jsonrpc: "2.0", id: 3, method: "ping" }, otherSession)
        assert.strictEqual(afterEnd.status, 404)
        // The first session is untouched by the other's end.
        assert.strictEqual(
          (yield* post(url, key, { jsonrpc: "2.0", id: 4, method: "ping" }, headers)).status,
          200
        )

        const endpoint = (method: string, extra: Record<string, string> = {}) =>
          Effect.promise(() =>
            fetch(`${url}/v1/mcp`, { method, headers: { authorization: `Bearer ${key}`, ...extra } })
          )
        assert.strictEqual((yield* endpoint("DELETE", otherSession)).status, 404)
        const noSession = yield* endpoint("DELETE")
        assert.strictEqual(noSession.status, 400)
        assert.strictEqual(
          (yield* Effect.promise(() => noSession.json() as Promise<any>)).error.message,
          "MCP-Session-Id header is required"
        )
        const streamed = yield* endpoint("GET", headers)
        assert.strictEqual(streamed.status, 405)
        assert.strictEqual(streamed.headers.get("allow"), "POST, DELETE")
        // A page may not call the endpoint, even this service's own.
        assert.strictEqual((yield* endpoint("DELETE", { ...headers, origin: url })).status, 403)
        yield* request(url, "DELETE", `/v1/sessions/${browser}`, { key })
      }),
    60_000
  )

  it.effect("spends the endpoint's own rate limit per principal, with the headers", () =>
    Effect.gen(function* () {
      const url = yield* baseUrl
      const { key } = yield* signUp(url)
      const ping = () =>
        Effect.promise(() =>
          fetch(`${url}/v1/mcp`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body: "{"
          })
        )
      for (let i = 0; i < MCP_BUDGET; i++) {
        const answered = yield* ping()
        assert.isBelow(answered.status, 429)
        assert.strictEqual(answered.headers.get("x-ratelimit-limit"), String(MCP_BUDGET))
      }
      const limited = yield* ping()
      assert.strictEqual(limited.status, 429)
      assert.deepStrictEqual(yield* Effect.promise(() => limited.json()), {
        error: { code: "rate_limited", message: "Too many requests." }
      })
      assert.isAtLeast(Number(limited.headers.get("retry-after")), 1)
      assert.strictEqual(limited.headers.get("x-ratelimit-scope"), "principal")
      // Another caller is not limited by it.
      const other = yield* signUp(url)
      const { client } = yield* connect(other.key)
      assert.isAbove((yield* Effect.promise(() => client.listTools())).tools.length, 0)
    })
  )
})
