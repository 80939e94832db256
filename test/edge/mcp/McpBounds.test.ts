import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request, signUp } from "../../support/Client.ts"
import { mcpPost } from "../../support/Mcp.ts"
import * as TestService from "../../support/TestService.ts"

const VERSION = "2025-11-25"

layer(TestService.layer({ limits: { mcpSessionsPerAccount: 2 } }), { excludeTestServices: true })(
  "MCP sessions of an account",
  (it) => {
    const baseUrl = Effect.map(TestService.TestService, (service) => service.baseUrl)

    /** A session opened with `key`: its headers. */
    const open = (key: string) =>
      Effect.gen(function* () {
        const opened = yield* mcpPost(
          yield* baseUrl,
          key,
          JSON.stringify({
            jsonrpc: "2.0",
            id: 0,
            method: "initialize",
            params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: "t", version: "1" } }
          })
        )
        assert.strictEqual(opened.status, 200, opened.text)
        return { "mcp-session-id": opened.headers.get("mcp-session-id")!, "mcp-protocol-version": VERSION }
      })

    /** What a `tools/list` in the session is answered with: 200 while the node keeps it, 404 once forgotten. */
    const list = (key: string, headers: Record<string, string>) =>
      Effect.gen(function* () {
        const answer = yield* mcpPost(
          yield* baseUrl,
          key,
          JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
          headers
        )
        return answer.status
      })

    it.effect("past LIMIT_MCP_SESSIONS_PER_ACCOUNT an account forgets its own oldest, not another's", () =>
      Effect.gen(function* () {
        const url = yield* baseUrl
        const [mine, other] = [yield* signUp(url), yield* signUp(url)]
        // A second key of the same account: the cap is the account's, not the key's.
        const second = yield* request(url, "POST", "/v1/keys", {
          cookie: mine.cookie,
          body: { name: "second" }
        })
        assert.strictEqual(second.status, 201, second.text)
        const theirs = yield* open(other.key)
        const first = yield* open(mine.key)
        const next = yield* open(mine.key)
        // Used since: `next` is the account's least recently used now, `theirs` the node's.
        assert.strictEqual(yield* list(mine.key, first), 200)
        const third = yield* open(second.json.secret)

        assert.strictEqual(yield* list(mine.key, next), 404, "the account's own oldest is forgotten")
        assert.strictEqual(yield* list(mine.key, first), 200)
        assert.strictEqual(yield* list(second.json.secret, third), 200)
        assert.strictEqual(yield* list(other.key, theirs), 200, "another account's stays")
      })
    )
  }
)
