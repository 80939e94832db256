import { assert, layer } from "@effect/vitest"
import { Deferred, Effect, Exit, Option, Schema, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import { decodeInput } from "../../src/kernel/Validation.ts"
import { LiveSessions } from "../../src/runtime/LiveSessions.ts"
import { refusalOf, type SessionKind } from "../../src/runtime/SessionKinds.ts"
import type { RuntimePool, SessionRuntime } from "../../src/runtime/SessionRuntime.ts"
import { request, signUp, waitForSession } from "../support/Client.ts"
import * as TestService from "../support/TestService.ts"

/** What an echo session says it moved through its egress: 400,000 bytes, 2,000 micro-USD at 5 USD per 10^9. */
const MOVED = { bytesUp: 150_000, bytesDown: 250_000 }

/**
 * A fourth kind of session, defined here alone and added through the
 * composition root: `cat` as its runtime, with nothing beyond what every
 * runtime gives its session's actor (no screen, no CDP, no commands).
 */
const echo: SessionKind = {
  descriptor: Effect.succeed({
    kind: "echo",
    sessionType: "echo",
    isolation: "browser",
    capabilities: new Set(),
    refusal: (capability) => refusalOf("echo", capability),
    accepts: {
      image: false,
      recording: false,
      logs: false,
      workspace: false,
      viewport: false,
      identity: false
    },
    resources: null,
    defaultImage: null,
    imageExists: () => Effect.succeed(false),
    decodeResize: decodeInput(Schema.Struct({ cols: Schema.Int, rows: Schema.Int })),
    endpoints: (urls) => ({ cdp_url: null, control: urls.gatewayUrl, video: null })
  }),
  pool: Effect.succeed<RuntimePool>({
    kind: "echo",
    acquire: (spec) =>
      Effect.gen(function* () {
        const exited = yield* Deferred.make<void>()
        const child = yield* Effect.acquireRelease(
          Effect.sync(() => ChildProcess.spawn("cat", [], { stdio: ["pipe", "ignore", "ignore"] })),
          (child) => Effect.sync(() => child.kill("SIGKILL"))
        )
        child.once("exit", () => Deferred.doneUnsafe(exited, Effect.void))
        return {
          kind: "echo",
          pid: child.pid!,
          device: "echo, a line at a time",
          egress: {
            region: spec.region,
            counters: () => MOVED,
            proxyIp: () => undefined,
            upstreamFailure: () => undefined,
            onRefused: () => () => {},
            probe: async () => ({ ok: true, detail: "" }),
            close: Effect.void
          },
          exited,
          crashReason: "launch_failed",
          serve: Effect.void,
          resize: () => Effect.void
        } satisfies SessionRuntime
      }),
    retire: (scope) => Scope.close(scope, Exit.void),
    idle: Effect.succeed(0),
    target: Effect.succeed(0),
    capacity: 2,
    ready: Effect.succeed(true)
  })
}

layer(TestService.layer({ browserPoolSize: 0 }, { kinds: [echo] }), { excludeTestServices: true })(
  "a fourth kind of session, through the port and the composition root alone",
  (it) => {
    it.effect("is created, read, refused what it lacks as a sandbox is, deleted, billed and audited", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const api = (method: string, path: string, body?: object) =>
          request(service.baseUrl, method, path, {
            key: account.key,
            ...(body === undefined ? {} : { body })
          })
        const account = yield* signUp(service.baseUrl)
        const balanceBefore = (yield* api("GET", "/v1/billing/summary")).json.balance_micro_usd

        const created = yield* api("POST", "/v1/sessions", { session_type: "echo" })
        assert.strictEqual(created.status, 201, created.text)
        assert.strictEqual(created.json.status, "creating")
        assert.isNull(created.json.cdp_url)
        const id: string = created.json.id

        const ready = yield* waitForSession(service.baseUrl, account.key, id, (s) => s.status === "ready")
        assert.strictEqual(ready.session_type, "echo")
        assert.strictEqual(ready.device, "echo, a line at a time")
        assert.deepStrictEqual(ready.endpoints, { control: `${service.baseUrl}/s/${id}/`, video: null })
        const listed = (yield* api("GET", "/v1/sessions")).json.data.map((s: { id: string }) => s.id)
        assert.include(listed, id)
        const { pid } = Option.getOrThrow((yield* LiveSessions).get(id)).runtime
        assert.isTrue(TestService.isAlive(pid), "its runtime runs")

        // The refusal a sandbox gets for a screenshot, in this kind's words.
        const screenshot = yield* api("POST", `/v1/sessions/${id}/screenshot`)
        assert.strictEqual(screenshot.status, 409)
        assert.deepStrictEqual(screenshot.json, {
          error: {
            code: "session_type_mismatch",
            message: "This is a echo session: it has no screen to capture."
          }
        })
        const exec = yield* api("POST", `/v1/sessions/${id}/exec`, { command: "true" })
        assert.strictEqual(exec.status, 409)
        assert.strictEqual(exec.json.error.code, "session_type_mismatch")

        assert.strictEqual((yield* api("DELETE", `/v1/sessions/${id}`)).status, 204)
        const ended = yield* waitForSession(service.baseUrl, account.key, id, (s) => s.status === "closed")
        assert.strictEqual(ended.ended_reason, "client_delete")
        assert.strictEqual(ended.bytes_up, MOVED.bytesUp)
        assert.strictEqual(ended.bytes_down, MOVED.bytesDown)
        for (let i = 0; i < 100 && TestService.isAlive(pid); i++) yield* Effect.sleep("50 millis")
        assert.isFalse(TestService.isAlive(pid), "its runtime is gone with it")

        // Billed as the others: what its egress moved, at 5 USD per 10^9 bytes.
        const balanceAfter = (yield* api("GET", "/v1/billing/summary")).json.balance_micro_usd
        assert.strictEqual(balanceBefore - balanceAfter, (MOVED.bytesUp + MOVED.bytesDown) / 200)
        // Audited as the others.
        const actions = (yield* api("GET", `/v1/audit/events?target_id=${id}`)).json.data.map(
          (event: { action: string }) => event.action
        )
        assert.includeMembers(actions, ["session.created", "session.deleted"])
      })
    )

    it.effect("a type no kind was registered for is refused as before", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const refused = yield* request(service.baseUrl, "POST", "/v1/sessions", {
          key,
          body: { session_type: "container" }
        })
        assert.strictEqual(refused.status, 400)
        assert.deepStrictEqual(refused.json, {
          error: { code: "invalid_field", message: "Invalid value for field: session_type." }
        })
      })
    )
  }
)
