import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"
import * as WebhookReceiver from "../../support/WebhookReceiver.ts"

layer(
  TestService.layer({
    browserPoolSize: 0,
    limits: { workspaceStorageMb: 1 },
    webhookAllowCidrs: "127.0.0.1/32"
  }),
  { excludeTestServices: true }
)("workspace storage and events", (it) => {
  it.effect(
    "an account's storage is capped (402 storage_limit_reached), and workspace changes are webhook events",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
          request(service.baseUrl, method, path, options)
        const { key } = yield* signUp(service.baseUrl)
        const receiver = yield* WebhookReceiver.serve
        const hook = yield* api("POST", "/v1/webhooks", {
          key,
          body: {
            url: receiver.url,
            events: ["workspace.created", "workspace.deleted", "snapshot.created", "snapshot.restored"]
          }
        })
        assert.strictEqual(hook.status, 201, hook.text)
        const ws = yield* api("POST", "/v1/workspaces", { key, body: { name: "small", image: "debian" } })
        assert.strictEqual(ws.status, 200, ws.text)
        const snap = yield* api("POST", "/v1/workspaces/small/snapshots", { key, body: { name: "empty" } })
        assert.strictEqual(snap.status, 200, snap.text)
        const restored = yield* api("POST", "/v1/workspaces/small/snapshots/empty/restore", { key })
        assert.strictEqual(restored.status, 200, restored.text)

        // 2 MB in its home: over the account's 1 MB once measured at the session's end.
        const made = yield* api("POST", "/v1/sessions", { key, body: { workspace: "small" } })
        assert.strictEqual(made.status, 201, made.text)
        yield* waitForSession(service.baseUrl, key, made.json.id, isReady)
        yield* api("POST", `/v1/sessions/${made.json.id}/exec`, {
          key,
          body: { command: "head -c 2M /dev/zero > ~/f" }
        })
        yield* api("DELETE", `/v1/sessions/${made.json.id}`, { key })
        let measured = 0
        for (let i = 0; i < 100 && measured < 2 * 1024 * 1024; i++) {
          yield* Effect.sleep("100 millis")
          measured = (yield* api("GET", "/v1/workspaces/small", { key })).json.used_bytes
        }
        assert.isAtLeast(measured, 2 * 1024 * 1024)
        const full = yield* api("POST", "/v1/workspaces/small/snapshots", { key, body: { name: "full" } })
        assert.strictEqual(full.status, 402)
        assert.strictEqual(full.json.error.code, "storage_limit_reached")
        assert.match(
          full.json.error.message,
          /^Workspace storage is full: the account's workspaces, snapshots and session logs hold \d+ MB of 1 MB/
        )
        const session = yield* api("POST", "/v1/sessions", { key, body: { workspace: "small" } })
        assert.strictEqual(session.status, 402)
        const clone = yield* api("POST", "/v1/workspaces", { key, body: { clone_from: "small" } })
        assert.strictEqual(clone.status, 402)
        const deleted = yield* api("DELETE", "/v1/workspaces/small", { key })
        assert.strictEqual(deleted.status, 204)

        const deadline = Date.now() + 15_000
        while (receiver.received.length < 4 && Date.now() < deadline) yield* Effect.sleep("100 millis")
        const events = receiver.received.map((r) => JSON.parse(r.body))
        assert.deepStrictEqual(events.map((e) => e.type).sort(), [
          "snapshot.created",
          "snapshot.restored",
          "workspace.created",
          "workspace.deleted"
        ])
        const created = events.find((e) => e.type === "workspace.created")
        assert.deepStrictEqual(created.data, {
          id: ws.json.id,
          name: "small",
          session_type: "sandbox",
          template: false,
          source_workspace_id: null
        })
        assert.include(events.find((e) => e.type === "snapshot.created").data, {
          name: "empty",
          workspace_id: ws.json.id
        })
      })
  )
})
