import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

// Every operation of the service's own OpenAPI document, walked with ids and
// field values no client should send: none may answer 5xx. A NUL byte is the
// one Postgres refuses outright, so it leads; the rest are what fuzzers try first.

const HOSTILE_IDS = [
  "%00",
  "a%00b",
  "sess_%00",
  "00000000-0000-4000-8000-00000000000%00",
  "%ff",
  "%ED%A0%80",
  "%E0%A4%A",
  "..%2F..%2Fetc%2Fpasswd",
  "%F0%9F%98%80",
  "'%20OR%201=1--",
  "x".repeat(4096)
]

const HOSTILE_STRINGS = ["a\u0000b", "\u0000", "\ud800", "x".repeat(100_000)]

const HOSTILE_QUERY_VALUES = ["%00", "a%00b", "%ED%A0%80", "%ff", "x".repeat(4096)]

/** Nested past any schema (and past a recursive walk's stack). */
const DEEP_ARRAY = "[".repeat(20_000) + "]".repeat(20_000)
const DEEP_OBJECT = '{"a":'.repeat(20_000) + "1" + "}".repeat(20_000)

const HOSTILE_BODIES = [
  '"\\u0000"',
  "[]",
  "null",
  '{"a":',
  "1e400",
  '{"\\u0000":1}',
  "\u0000",
  DEEP_ARRAY,
  DEEP_OBJECT
]

type JsonSchema = Record<string, any>

const resolve = (spec: JsonSchema, schema: JsonSchema | undefined): JsonSchema | undefined => {
  if (schema?.$ref === undefined) return schema
  const name = String(schema.$ref).replace("#/components/schemas/", "")
  return resolve(spec, spec.components?.schemas?.[name])
}

/** Bodies with one hostile value at a time, in each string field (one level of nesting too). */
const hostileBodies = (spec: JsonSchema, schema: JsonSchema | undefined): Array<unknown> => {
  const bodies: Array<unknown> = []
  const variants = (property: JsonSchema | undefined, depth: number): Array<unknown> => {
    const resolved = resolve(spec, property)
    const nested = resolved?.anyOf ?? resolved?.oneOf
    if (Array.isArray(nested)) return nested.flatMap((each: JsonSchema) => variants(each, depth))
    if (resolved?.type === "object" && resolved.properties !== undefined && depth < 2) {
      return Object.entries(resolved.properties as Record<string, JsonSchema>).flatMap(([key, inner]) =>
        variants(inner, depth + 1).map((value) => ({ [key]: value }))
      )
    }
    if (resolved?.type === "array") return HOSTILE_STRINGS.map((value) => [value])
    return [...HOSTILE_STRINGS, 1.5, -1, true, {}]
  }
  const root = resolve(spec, schema)
  if (root?.properties !== undefined) {
    for (const [key, property] of Object.entries(root.properties as Record<string, JsonSchema>)) {
      for (const value of variants(property, 1)) bodies.push({ [key]: value })
    }
  }
  return bodies
}

const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

// Routes that would end the walker's own login come last.
const LAST = new Set(["/auth/logout", "/auth/logout-everywhere"])

layer(TestService.layer())("hostile input", (it) => {
  describe("every OpenAPI operation", () => {
    it.effect(
      "answers hostile ids, query values and bodies with 4xx in the API's error shape, never 5xx",
      () =>
        Effect.gen(function* () {
          const service = yield* TestService.TestService
          const user = yield* signUp(service.baseUrl)
          const spec = (yield* api("GET", "/api-docs/openapi.json")).json
          const failures: Array<string> = []
          let requests = 0
          // A route any credential opens is walked with the key (the CDP upgrade takes no cookie), the rest with the cookie.
          let credential: { cookie: string } | { key: string } = { cookie: user.cookie }
          const check = (method: string, path: string, options: Parameters<typeof request>[3]) =>
            Effect.gen(function* () {
              requests++
              const response = yield* api(method, path, { ...credential, ...options })
              // The MCP endpoint answers a bad message with a JSON-RPC error: its protocol's shape.
              const jsonRpc =
                path.startsWith("/v1/mcp") &&
                response.json?.jsonrpc === "2.0" &&
                typeof response.json?.error?.code === "number"
              const shaped =
                response.status < 400 ||
                response.status === 401 ||
                jsonRpc ||
                (typeof response.json?.error?.code === "string" &&
                  typeof response.json?.error?.message === "string")
              if (response.status >= 500 || !shaped) {
                const body = options?.rawBody ?? JSON.stringify(options?.body ?? null)
                failures.push(
                  `${method} ${path.slice(0, 120)} ${body.slice(0, 80)} -> ${response.status} ${response.text.slice(0, 120)}`
                )
              }
            })
          const operations = Object.entries(spec.paths as Record<string, Record<string, JsonSchema>>)
            .flatMap(([path, methods]) =>
              Object.entries(methods).map(([method, operation]) => ({ path, method, operation }))
            )
            .sort((a, b) => Number(LAST.has(a.path)) - Number(LAST.has(b.path)))
          for (const { path, method, operation } of operations) {
            const verb = method.toUpperCase()
            credential =
              operation["x-required-access"]?.credentials === "any" ||
              operation["x-required-access"]?.credentials === "any-or-assistant"
                ? { key: user.key }
                : { cookie: user.cookie }
            const params = path.match(/\{[a-z_]+\}/g) ?? []
            const plain = path.replace(/\{uid\}/, user.userId).replace(/\{[a-z_]+\}/g, "x")
            for (const param of params) {
              for (const id of HOSTILE_IDS) {
                const hostile = path.replace(param, id).replace(/\{[a-z_]+\}/g, "x")
                yield* check(verb, hostile, verb === "GET" || verb === "DELETE" ? {} : { body: {} })
              }
            }
            // A cookie route given an API key instead: refused, never a failure, whatever the id.
            if ("cookie" in credential && params.length > 0) {
              const cookie = credential
              credential = { key: user.key }
              for (const id of ["%00", "a%00b"]) {
                const hostile = path.replace(params[0]!, id).replace(/\{[a-z_]+\}/g, "x")
                yield* check(verb, hostile, verb === "GET" || verb === "DELETE" ? {} : { body: {} })
              }
              credential = cookie
            }
            for (const query of (operation.parameters ?? []).filter((p: JsonSchema) => p.in === "query")) {
              for (const value of HOSTILE_QUERY_VALUES) {
                yield* check(verb, `${plain}?${query.name}=${value}`, {})
              }
            }
            const bodySchema = operation.requestBody?.content?.["application/json"]?.schema
            if (bodySchema !== undefined) {
              for (const body of hostileBodies(spec, bodySchema)) yield* check(verb, plain, { body })
              for (const rawBody of HOSTILE_BODIES) yield* check(verb, plain, { rawBody })
            }
          }
          assert.deepStrictEqual(failures, [])
          // The walk reached every operation (and hundreds of requests), not a handful.
          assert.isAbove(operations.length, 50)
          assert.isAbove(requests, 800)
        }),
      240_000
    )
  })

  describe("what a NUL byte answers", () => {
    it.effect("an id holding U+0000 is the route's 404 before any query", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const user = yield* signUp(service.baseUrl)
        const cases: Array<[string, string, string]> = [
          ["GET", "/v1/sessions/%00", "session_not_found"],
          ["DELETE", "/v1/sessions/sess_%00", "session_not_found"],
          ["DELETE", "/v1/keys/%00", "key_not_found"],
          ["DELETE", "/v1/accounts/current/members/%00", "member_not_found"],
          ["DELETE", "/v1/accounts/current/service-accounts/%00", "service_account_not_found"],
          ["DELETE", "/v1/ssh-keys/%00", "ssh_key_not_found"],
          ["GET", "/billing/checkout/%00", "checkout_not_found"]
        ]
        for (const [method, path, code] of cases) {
          const response = yield* api(method, path, { cookie: user.cookie })
          assert.strictEqual(response.status, 404, `${method} ${path}: ${response.text}`)
          assert.strictEqual(response.json.error.code, code, `${method} ${path}`)
        }
        const key = yield* api("GET", "/v1/sessions/%00", { key: user.key })
        assert.strictEqual(key.json.error.code, "session_not_found")
        // The same answer with a credential the route refuses: the id is checked first, so no
        // refusal naming it is written to the audit trail.
        const withKey: Array<[string, string, string]> = [
          ["DELETE", "/v1/keys/%00", "key_not_found"],
          ["POST", "/v1/keys/%00/rotate", "key_not_found"],
          ["POST", "/billing/checkout/%00", "checkout_not_found"]
        ]
        for (const [method, path, code] of withKey) {
          const response = yield* api(method, path, { key: user.key, body: {} })
          assert.strictEqual(response.status, 404, `${method} ${path} with a key: ${response.text}`)
          assert.strictEqual(response.json.error.code, code, `${method} ${path} with a key`)
        }
        const refused = yield* api("DELETE", "/v1/keys/x", { key: user.key })
        assert.strictEqual(refused.status, 403, refused.text)
      })
    )

    it.effect("a text field holding U+0000 is 400 invalid_field naming the field", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const user = yield* signUp(service.baseUrl)
        const named = yield* api("POST", "/v1/billing/account", {
          cookie: user.cookie,
          body: { name: "Acme\u0000Corp" }
        })
        assert.strictEqual(named.status, 400)
        assert.deepStrictEqual(named.json, {
          error: { code: "invalid_field", message: "Invalid value for field: name." }
        })
        const key = yield* api("POST", "/v1/keys", { cookie: user.cookie, body: { name: "\u0000" } })
        assert.strictEqual(key.json.error.message, "Invalid value for field: name.")
        const query = yield* api("GET", "/v1/audit/events?action=%00", { cookie: user.cookie })
        assert.deepStrictEqual(query.json, {
          error: { code: "invalid_field", message: "Invalid value for field: action." }
        })
        // Nesting past the documented depth is refused whole, before anything walks it.
        for (const rawBody of [DEEP_ARRAY, DEEP_OBJECT, `{"name":${"[".repeat(65)}${"]".repeat(65)}}`]) {
          const deep = yield* api("POST", "/v1/keys", { cookie: user.cookie, rawBody })
          assert.deepStrictEqual(deep.json, {
            error: { code: "invalid_request", message: "Request body is malformed." }
          })
        }
        const shallow = yield* api("POST", "/v1/keys", {
          cookie: user.cookie,
          rawBody: `{"name":${"[".repeat(63)}${"]".repeat(63)}}`
        })
        assert.strictEqual(shallow.json.error.code, "invalid_field")
        // Nothing was written: the contact is still empty.
        const summary = yield* api("GET", "/v1/billing/summary", { cookie: user.cookie })
        assert.strictEqual(summary.json.billing_contact?.name ?? null, null)
      })
    )
  })
  describe("bodies past the limit", () => {
    it.effect("a body over 32 MiB is 413 payload_too_large, whether it says its length or not", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const user = yield* signUp(service.baseUrl)
        const big = JSON.stringify({ command: "true", stdin: "x".repeat(33 * 1024 * 1024) })
        const said = yield* Effect.promise(() =>
          fetch(`${service.baseUrl}/v1/exec`, {
            method: "POST",
            headers: { authorization: `Bearer ${user.key}`, "content-type": "application/json" },
            body: big
          }).then(async (response) => ({ status: response.status, json: (await response.json()) as any }))
        )
        assert.strictEqual(said.status, 413)
        assert.deepStrictEqual(said.json, {
          error: {
            code: "payload_too_large",
            message: "Request body exceeds the 32 MiB (33554432 bytes) limit."
          }
        })
        // Sent in chunks, no length: reading stops at the limit, with the same answer.
        const chunked = yield* Effect.promise(() =>
          fetch(`${service.baseUrl}/v1/keys`, {
            method: "POST",
            headers: { cookie: user.cookie, "content-type": "application/json" },
            body: new ReadableStream({
              start(controller) {
                for (let i = 0; i < 34; i++)
                  controller.enqueue(new TextEncoder().encode("x".repeat(1024 * 1024)))
                controller.close()
              }
            }),
            duplex: "half"
          } as RequestInit).then(async (response) => ({
            status: response.status,
            json: (await response.json()) as any
          }))
        )
        assert.strictEqual(chunked.status, 413, JSON.stringify(chunked.json))
        assert.strictEqual(chunked.json.error.code, "payload_too_large")
        const fine = yield* api("GET", "/v1/sessions", { key: user.key })
        assert.strictEqual(fine.status, 200, "the service goes on")
      })
    )
  })
})
