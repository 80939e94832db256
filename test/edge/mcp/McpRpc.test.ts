import { assert, describe, it } from "@effect/vitest"
import { classify } from "../../../src/edge/mcp/McpRpc.ts"

describe("McpRpc.classify", () => {
  it("tells requests, notifications and responses from what is no JSON-RPC 2.0 message", () => {
    const cases: ReadonlyArray<readonly [unknown, unknown]> = [
      [
        { jsonrpc: "2.0", id: 1, method: "ping" },
        { _tag: "Request", id: 1, method: "ping", params: undefined }
      ],
      [
        { jsonrpc: "2.0", id: "a", method: "tools/call", params: { name: "x" } },
        { _tag: "Request", id: "a", method: "tools/call", params: { name: "x" } }
      ],
      [
        { jsonrpc: "2.0", id: 1.5, method: "ping" },
        { _tag: "Request", id: 1.5, method: "ping", params: undefined }
      ],
      [
        { jsonrpc: "2.0", method: "notifications/initialized" },
        { _tag: "Notification", method: "notifications/initialized", params: undefined }
      ],
      [{ jsonrpc: "2.0", id: 1, result: {} }, { _tag: "Response" }],
      [{ jsonrpc: "2.0", id: null, error: { code: 1, message: "x" } }, { _tag: "Response" }],
      // Both a result and an error, or neither: no response.
      [
        { jsonrpc: "2.0", id: 1, result: {}, error: {} },
        { _tag: "Invalid", id: 1 }
      ],
      [
        { jsonrpc: "2.0", id: 3 },
        { _tag: "Invalid", id: 3 }
      ],
      // An id no request may carry is not echoed.
      [
        { jsonrpc: "2.0", id: null, method: "ping" },
        { _tag: "Invalid", id: null }
      ],
      [
        { jsonrpc: "2.0", id: true, method: "ping" },
        { _tag: "Invalid", id: null }
      ],
      [
        { jsonrpc: "2.0", id: {}, method: "ping" },
        { _tag: "Invalid", id: null }
      ],
      [
        { jsonrpc: "1.0", id: 1, method: "ping" },
        { _tag: "Invalid", id: 1 }
      ],
      [
        { id: 1, method: "ping" },
        { _tag: "Invalid", id: 1 }
      ],
      [
        { jsonrpc: "2.0", id: 1, method: 5 },
        { _tag: "Invalid", id: 1 }
      ],
      [42, { _tag: "Invalid", id: null }],
      [null, { _tag: "Invalid", id: null }],
      [[{ jsonrpc: "2.0", id: 1, method: "ping" }], { _tag: "Invalid", id: null }]
    ]
    for (const [input, expected] of cases)
      assert.deepStrictEqual(classify(input), expected, JSON.stringify(input))
  })
})
