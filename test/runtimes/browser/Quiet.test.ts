import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

/** The egress proxies' counts a browser's own requests would move: refusals by reason, and bytes. */
const egressCounts = (baseUrl: string) =>
  Effect.map(request(baseUrl, "GET", "/metrics", {}), (metrics) =>
    metrics.text
      .split("\n")
      .filter((line) => /^rbs_egress_(refused|bytes)_total\{/.test(line) && !line.endsWith(" 0"))
  )

// A self-hosted browser makes no request its user did not cause, and bills none: every request a
// browser makes goes through its egress proxy (or is refused there, counted by reason).
layer(TestService.layer({ browserPoolSize: 2 }), { excludeTestServices: true })(
  "a browser that calls no one unasked",
  (it) => {
    it.effect(
      "idle warm browsers, and idle browser, context and workspace sessions, ask for nothing",
      () =>
        Effect.gen(function* () {
          const service = yield* TestService.TestService
          const { key } = yield* signUp(service.baseUrl)
          // The warm pool starts and idles: a Chromium's start is when it used to call Google.
          yield* Effect.sleep("6 seconds")
          assert.deepStrictEqual(yield* egressCounts(service.baseUrl), [], "the idle warm pool")

          const workspace = yield* request(service.baseUrl, "POST", "/v1/workspaces", {
            key,
            body: { name: "quiet" }
          })
          assert.strictEqual(workspace.status, 200, workspace.text)
          const sessions: Array<string> = []
          // A browser of its own, a context in the account's shared browser, and a Chromium launched
          // cold on a workspace's profile.
          for (const body of [{}, { isolation: "context" }, { workspace: "quiet" }]) {
            const created = yield* request(service.baseUrl, "POST", "/v1/sessions", { key, body })
            assert.strictEqual(created.status, 201, created.text)
            sessions.push(created.json.id)
          }
          for (const id of sessions) yield* waitForSession(service.baseUrl, key, id, isReady)
          // Served, then left alone for the window the test watches; the pool refills meanwhile
          // (another start).
          yield* Effect.sleep("6 seconds")
          assert.deepStrictEqual(yield* egressCounts(service.baseUrl), [], "idle sessions")
          for (const id of sessions) {
            const ended = yield* request(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })
            assert.isBelow(ended.status, 300, ended.text)
            const record = (yield* request(service.baseUrl, "GET", `/v1/sessions/${id}`, { key })).json
            assert.deepStrictEqual([record.bytes_up, record.bytes_down], [0, 0], `${id} moved no byte`)
          }
        }),
      60_000
    )
  }
)
