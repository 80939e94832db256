import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { createClient, RemoteBrowser } from "../../../src/edge/client/client.ts"
import { SessionNotFound } from "../../../src/kernel/Errors.ts"
import { PNG_SIGNATURE, signUp } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"
import * as WebhookReceiver from "../../support/WebhookReceiver.ts"

layer(TestService.layer({ browserPoolSize: 1, webhookAllowCidrs: "127.0.0.1/32" }), {
  excludeTestServices: true
})("the typed client", (it) => {
  const account = Effect.flatMap(TestService.TestService, (service) =>
    Effect.map(signUp(service.baseUrl), (user) => ({ ...user, baseUrl: service.baseUrl }))
  )

  it.effect(
    "the Promise client drives keys, webhooks and a session's life, and rejects with the routes' errors",
    () =>
      Effect.gen(function* () {
        const user = yield* account
        const receiver = yield* WebhookReceiver.serve
        const dashboard = createClient({ baseUrl: user.baseUrl, sessionCookie: user.cookie.split("=")[1]! })
        const key = yield* Effect.promise(() =>
          dashboard.keys.create({
            payload: {
              name: "client",
              scopes: ["sessions.read", "sessions.write", "webhooks.read", "webhooks.write"]
            }
          })
        )
        assert.match(key.secret, /^svc_live_/)
        const keys = yield* Effect.promise(() => dashboard.keys.list())
        assert.isTrue(keys.keys.some((each) => each.id === key.id))

        const rbs = createClient({ baseUrl: user.baseUrl, apiKey: key.secret })
        const hook = yield* Effect.promise(() =>
          rbs.webhooks.create({ payload: { url: receiver.url, events: ["session.ready", "session.closed"] } })
        )
        assert.match(hook.signing_secret, /^whsec_/)

        const session = yield* Effect.promise(() => rbs.sessions.create({ payload: { ttl_seconds: 120 } }))
        assert.match(session.id, /^sess_/)
        let ready = session
        const deadline = Date.now() + 30_000
        while (ready.status !== "ready" && Date.now() < deadline) {
          yield* Effect.sleep("50 millis")
          ready = yield* Effect.promise(() => rbs.sessions.get({ params: { id: session.id } }))
        }
        assert.strictEqual(ready.status, "ready")
        const png = yield* Effect.promise(() => rbs.sessions.screenshot({ params: { id: session.id } }))
        assert.deepStrictEqual([...png.subarray(0, 8)], PNG_SIGNATURE)
        const listed = yield* Effect.promise(() => rbs.sessions.list({ query: {} }))
        assert.strictEqual(listed.data[0]?.id, session.id)
        yield* Effect.promise(() => rbs.sessions.delete({ params: { id: session.id } }))

        // `headers` left out sends none; given, it is sent: the same Idempotency-Key answers the first session again.
        const again = () =>
          rbs.sessions.create({
            payload: { ttl_seconds: 120 },
            headers: { "idempotency-key": "client-retry" }
          })
        const first = yield* Effect.promise(again)
        const replayed = yield* Effect.promise(again)
        assert.strictEqual(replayed.id, first.id)
        assert.notStrictEqual(first.id, session.id)
        yield* Effect.promise(() => rbs.sessions.delete({ params: { id: first.id } }))

        // The events arrive, and the deliveries read back through the client.
        yield* receiver.waitFor(2)
        const deliveries = yield* Effect.promise(() => rbs.webhooks.deliveries({ query: {} }))
        assert.includeMembers(
          deliveries.data.map((delivery) => delivery.event_type),
          ["session.ready", "session.closed"]
        )

        // A route's error is its own class, with the API's status, code and message.
        const missing = yield* Effect.promise(() =>
          rbs.sessions.get({ params: { id: "sess_00000000-0000-4000-8000-000000000000" } }).then(
            () => assert.fail("an unknown session answered"),
            (error: unknown) => error
          )
        )
        assert.instanceOf(missing, SessionNotFound)
        assert.include(missing as SessionNotFound, {
          status: 404,
          code: "session_not_found",
          message: "Session not found."
        })
        const closedAgain = yield* Effect.promise(() =>
          rbs.sessions.delete({ params: { id: session.id } }).then(
            () => assert.fail("a closed session closed again"),
            (error: any) => error
          )
        )
        assert.strictEqual(closedAgain.code, "session_not_open")
        const unauthenticated = yield* Effect.promise(() =>
          createClient({ baseUrl: user.baseUrl, apiKey: "svc_live_nope" })
            .sessions.list({ query: {} })
            .then(
              () => assert.fail("a bad key listed sessions"),
              (error: any) => error
            )
        )
        assert.strictEqual(unauthenticated.code, "unauthorized")
      })
  )

  it.effect("the Effect client is a service whose routes fail with typed errors", () =>
    Effect.gen(function* () {
      const user = yield* account
      const listed = yield* Effect.gen(function* () {
        const client = yield* RemoteBrowser
        const page = yield* client.sessions.list({ query: { limit: 5 } })
        const missing = yield* client.sessions
          .get({ params: { id: "sess_00000000-0000-4000-8000-000000000000" } })
          .pipe(Effect.flip)
        return { page, missing }
      }).pipe(Effect.provide(RemoteBrowser.layer({ baseUrl: user.baseUrl, apiKey: user.key })))
      assert.deepStrictEqual(listed.page.data, [])
      assert.strictEqual(listed.missing._tag, "SessionNotFound")
    })
  )
})
