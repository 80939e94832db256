import { assert, layer } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Deferred, Effect, Fiber, Queue } from "effect"
import * as Crypto from "node:crypto"
import { SqlClient } from "effect/sql"
import { WAKE_CHANNEL } from "../../../src/features/assistants/AssistantWake.ts"
import { request, signUp } from "../../support/Client.ts"
import * as WebhookReceiver from "../../support/WebhookReceiver.ts"
import * as TestService from "../../support/TestService.ts"

/**
 * The runtime under test, run by the service in the assistant's sandbox: it
 * reads its state, resolves a credential, counts its boots in a file of its
 * home, and writes what it saw back as its state (the credential's hash, never
 * the value). It keeps its token in the state so the test can try it after a
 * pause. Then it idles, as a runtime waiting for work would.
 */
const RUNTIME = `
import hashlib, json, os, time, urllib.error, urllib.request
api, me, token = os.environ["RBS_API_URL"], os.environ["RBS_ASSISTANT_ID"], os.environ["RBS_ASSISTANT_TOKEN"]
def call(method, path, body=None, headers={}):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(api + path, data=data, method=method,
        headers={"authorization": "Bearer " + token, "content-type": "application/json", **headers})
    with urllib.request.urlopen(req, timeout=10) as res:
        return json.loads(res.read()), res.headers.get("etag")
state, etag = call("GET", "/v1/assistants/%s/runtime-state" % me)
secret, _ = call("POST", "/v1/assistants/resolve-credential", {"name": "api_key"})
# Its channel is bound right after it is created: wait for it.
for _ in range(150):
    try:
        channel, _ = call("POST", "/v1/assistants/resolve-channel", {"name": "inbox"})
        break
    except urllib.error.HTTPError as e:
        if e.code != 404: raise
        time.sleep(0.2)
if state["state"].get("boots", 0) == 0:
    call("POST", "/v2/assistants/%s/config-intents" % me, {"patch": {"model": "large"}, "reason": "tasks got harder"})
call("POST", "/v1/assistants/%s/usage-events" % me,
    {"model": "small", "input_tokens": 120, "output_tokens": 30, "cost_usd": 0.0015})
# The service's name serves the runtime's routes, nothing else of it.
try:
    urllib.request.urlopen(api + "/metrics", timeout=10)
    metrics = 200
except urllib.error.HTTPError as e:
    metrics = e.code
with open("/root/boots.txt", "a") as f:
    f.write("boot\\n")
lines = len(open("/root/boots.txt").read().splitlines())
boots = state["state"].get("boots", 0) + 1
call("PUT", "/v1/assistants/%s/runtime-state" % me, {"state": {
    "boots": boots, "lines": lines, "greeting": os.environ.get("GREETING"),
    "secret_sha": hashlib.sha256(secret["value"].encode()).hexdigest(), "scope": secret["scope"],
    "channel": [channel["kind"], channel["config"].get("path"), channel["secret"]],
    "token": token, "metrics": metrics}}, {"if-match": etag})
while True:
    time.sleep(60)
`

const SECRET = "s3cret-value-do-not-leak"

layer(
  TestService.layer({ browserPoolSize: 0, sandbox: { poolSize: 1 }, webhookAllowCidrs: "127.0.0.1/32" }),
  { excludeTestServices: true }
)("assistants", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  /** Polls the runtime state (real time, 60 s at most) until `done` holds. */
  const waitForState = (key: string, id: string, done: (state: any) => boolean) =>
    Effect.gen(function* () {
      const deadline = Date.now() + 60_000
      while (true) {
        const got = yield* api("GET", `/v1/assistants/${id}/runtime-state`, { key })
        assert.strictEqual(got.status, 200, got.text)
        if (done(got.json.state)) return got
        if (Date.now() > deadline) {
          const assistant = yield* api("GET", `/v1/assistants/${id}`, { key })
          return assert.fail(`the runtime never got there: ${got.text} ${assistant.text}`)
        }
        yield* Effect.sleep("200 millis")
      }
    })

  it.effect(
    "a runtime in its sandbox reads its state, resolves a credential and writes back; pause and resume keep its home",
    () =>
      Effect.gen(function* () {
        const user = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const key = user.key
        const put = yield* api("PUT", "/v1/assistants/credentials", {
          key,
          body: { name: "api_key", value: SECRET }
        })
        assert.strictEqual(put.status, 200, put.text)
        assert.notInclude(put.text, SECRET)
        assert.include(put.json, { object: "assistant_credential", name: "api_key", assistant_id: null })

        const created = yield* api("POST", "/v1/assistants", {
          key,
          body: {
            name: "helper",
            config: { command: ["python3", "-c", RUNTIME], env: { GREETING: "hello" }, model: "small" }
          }
        })
        assert.strictEqual(created.status, 201, created.text)
        assert.include(created.json, {
          object: "assistant",
          name: "helper",
          status: "running",
          config_version: 1
        })
        const id = created.json.id as string
        const bound = yield* api("POST", `/v1/assistants/${id}/channels`, {
          key,
          body: { kind: "webhook", name: "inbox", config: { path: "/hooks/in" }, secret: "whsec-channel" }
        })
        assert.strictEqual(bound.status, 201, bound.text)
        assert.include(bound.json, {
          object: "assistant_channel",
          kind: "webhook",
          name: "inbox",
          has_secret: true
        })
        assert.notInclude(bound.text, "whsec-channel")
        const workspace = yield* api("GET", `/v1/workspaces/${created.json.workspace_id}`, { key })
        assert.strictEqual(workspace.status, 200, workspace.text)
        assert.include(workspace.json, { assistant_home: true, session_type: "sandbox" })

        const first = yield* waitForState(key, id, (state) => state.boots === 1)
        assert.include(first.json.state, {
          boots: 1,
          lines: 1,
          greeting: "hello",
          scope: "account",
          secret_sha: Crypto.createHash("sha256").update(SECRET).digest("hex")
        })
        assert.deepStrictEqual(first.json.state.channel, ["webhook", "/hooks/in", "whsec-channel"])
        assert.strictEqual(first.json.state.metrics, 403)
        // Its reported model use: paged, and summed in the usage report.
        const events = yield* api("GET", `/v1/assistants/${id}/usage-events`, { key })
        assert.strictEqual(events.status, 200, events.text)
        assert.lengthOf(events.json.data, 1)
        assert.include(events.json.data[0], {
          model: "small",
          input_tokens: 120,
          output_tokens: 30,
          cost_micro_usd: 1500
        })
        const usage = yield* api("GET", "/v1/usage", { key })
        assert.deepStrictEqual(usage.json.assistants, [
          {
            assistant_id: id,
            name: "helper",
            events: 1,
            input_tokens: 120,
            output_tokens: 30,
            cost_micro_usd: 1500
          }
        ])
        const memberChannel = yield* api("POST", "/v1/assistants/resolve-channel", {
          key,
          body: { name: "inbox" }
        })
        assert.strictEqual(memberChannel.status, 403, memberChannel.text)
        // It proposed a change of its own config; an owner approves it, applied at once.
        const proposed = yield* api("GET", `/v2/assistants/${id}/config-intents?status=pending`, { key })
        assert.strictEqual(proposed.status, 200, proposed.text)
        assert.lengthOf(proposed.json.data, 1)
        assert.include(proposed.json.data[0], {
          status: "pending",
          proposed_by: `assistant:${id}`,
          base_version: 1,
          reason: "tasks got harder"
        })
        const intentId = proposed.json.data[0].id
        const selfApproval = yield* api("POST", `/v2/assistants/${id}/config-intents/${intentId}/approve`, {
          key: first.json.state.token
        })
        assert.strictEqual(selfApproval.status, 403, selfApproval.text)
        const approved = yield* api("POST", `/v2/assistants/${id}/config-intents/${intentId}/approve`, {
          key,
          body: { note: "ok" }
        })
        assert.strictEqual(approved.status, 200, approved.text)
        assert.include(approved.json, { status: "approved", applied_version: 2, decision_note: "ok" })
        const reconfigured = yield* api("GET", `/v1/assistants/${id}`, { key })
        assert.include(reconfigured.json, { config_version: 2 })
        assert.strictEqual(reconfigured.json.config.model, "large")
        assert.strictEqual(
          (yield* api("POST", `/v2/assistants/${id}/config-intents/${intentId}/approve`, { key })).json.error
            .code,
          "intent_conflict"
        )

        const token = first.json.state.token as string
        assert.match(token, /^asrt_/)
        const running = yield* api("GET", `/v1/assistants/${id}`, { key })
        const sessionId = running.json.session_id as string
        assert.match(sessionId, /^sess_/)
        const session = yield* api("GET", `/v1/sessions/${sessionId}`, { key })
        assert.include(session.json, { session_type: "sandbox", status: "ready" })

        // The runtime reads its own record (its config, who is linked to it).
        const self = yield* api("GET", `/v1/assistants/${id}`, { key: token })
        assert.strictEqual(self.status, 200, self.text)
        assert.deepStrictEqual(self.json.links, [])

        // The token opens the runtime's routes on its own assistant, nothing else.
        assert.strictEqual((yield* api("GET", "/v1/sessions", { key: token })).status, 403)
        assert.strictEqual((yield* api("GET", "/v1/assistants", { key: token })).status, 403)
        assert.strictEqual(
          (yield* api("PUT", "/v1/assistants/credentials", { key: token, body: { name: "x", value: "y" } }))
            .status,
          403
        )
        // A member may not resolve a credential: only a runtime's token opens the vault.
        const member = yield* api("POST", "/v1/assistants/resolve-credential", {
          key,
          body: { name: "api_key" }
        })
        assert.strictEqual(member.status, 403, member.text)
        const missing = yield* api("POST", "/v1/assistants/resolve-credential", {
          key: token,
          body: { name: "nope" }
        })
        assert.strictEqual(missing.status, 404, missing.text)
        assert.strictEqual(missing.json.error.code, "credential_not_found")

        // An assistant's own value wins over the account's.
        const own = yield* api("PUT", "/v1/assistants/credentials", {
          key,
          body: { name: "api_key", value: "the-assistant-own", assistant_id: id }
        })
        assert.strictEqual(own.status, 200, own.text)
        const resolved = yield* api("POST", "/v1/assistants/resolve-credential", {
          key: token,
          body: { name: "api_key" }
        })
        assert.deepStrictEqual(resolved.json, {
          object: "assistant_credential_value",
          name: "api_key",
          value: "the-assistant-own",
          scope: "assistant"
        })

        // ETags: a stale write is refused, a current one lands.
        const read = yield* api("GET", `/v1/assistants/${id}/runtime-state`, { key })
        const etag = read.headers.get("etag")!
        assert.strictEqual(etag, `"${read.json.version}"`)
        const stale = yield* api("PUT", `/v1/assistants/${id}/runtime-state`, {
          key,
          headers: { "if-match": `"${read.json.version - 1}"` },
          body: { state: { boots: 99 } }
        })
        assert.strictEqual(stale.status, 412, stale.text)
        assert.strictEqual(stale.json.error.code, "precondition_failed")
        const fresh = yield* api("PUT", `/v1/assistants/${id}/runtime-state`, {
          key,
          headers: { "if-match": etag },
          body: { state: { ...read.json.state, note: "kept" } }
        })
        assert.strictEqual(fresh.status, 200, fresh.text)
        assert.strictEqual(fresh.headers.get("etag"), `"${read.json.version + 1}"`)

        // Pause: the session ends, the token stops at once, the home and the state stay.
        const paused = yield* api("POST", `/v1/assistants/${id}/pause`, { key })
        assert.strictEqual(paused.status, 200, paused.text)
        assert.include(paused.json, { status: "paused", session_id: null })
        const ended = yield* api("GET", `/v1/sessions/${sessionId}`, { key })
        assert.strictEqual(ended.json.status, "closed")
        assert.strictEqual(
          (yield* api("GET", `/v1/assistants/${id}/runtime-state`, { key: token })).status,
          401
        )

        const resumed = yield* api("POST", `/v1/assistants/${id}/resume`, { key })
        assert.strictEqual(resumed.status, 200, resumed.text)
        assert.strictEqual(resumed.json.status, "running")
        const second = yield* waitForState(key, id, (state) => state.boots === 2)
        // The file in its home survived the pause; the state too (its note).
        assert.strictEqual(second.json.state.lines, 2)
        assert.notStrictEqual(second.json.state.token, token)
        const after = yield* api("GET", `/v1/assistants/${id}`, { key })
        assert.notStrictEqual(after.json.session_id, sessionId)
        assert.strictEqual(after.json.restarts, 0)

        // A session that ends under it (its TTL, a crash, a DELETE) is replaced: the runtime starts again.
        // Its end wakes every node's sweep at once (a NOTIFY from the transaction that ends it), where
        // the sweep would otherwise wait for its safety poll (30 s).
        const wakes = yield* Effect.flatMap(PgClient.PgClient, (pg) => pg.listen(WAKE_CHANNEL))
        const killedAt = Date.now()
        const killed = yield* api("DELETE", `/v1/sessions/${after.json.session_id}`, { key })
        assert.strictEqual(killed.status, 204, killed.text)
        yield* Queue.take(wakes).pipe(
          Effect.timeoutOrElse({
            duration: "5 seconds",
            orElse: () => Effect.die(new Error("the session's end did not wake the sweep"))
          })
        )
        while (
          (yield* api("GET", `/v1/assistants/${id}`, { key })).json.session_id === after.json.session_id
        ) {
          assert.isBelow(Date.now() - killedAt, 20_000, "no new session within 20 s of the end of its last")
          yield* Effect.sleep("100 millis")
        }
        const third = yield* waitForState(key, id, (state) => state.boots === 3)
        assert.strictEqual(third.json.state.lines, 3)
        const restarted = yield* api("GET", `/v1/assistants/${id}`, { key })
        assert.include(restarted.json, { status: "running", restarts: 1, last_error: null })
        assert.notStrictEqual(restarted.json.session_id, after.json.session_id)

        // The secret never left the vault but to the runtime: not in records, lists or the audit trail.
        const audit = yield* api("GET", "/v1/audit/events?limit=100", { cookie: user.cookie })
        assert.strictEqual(audit.status, 200, audit.text)
        for (const text of [audit.text, after.text, (yield* api("GET", "/v1/assistants", { key })).text])
          assert.notInclude(text, SECRET)
        const actions = audit.json.data.map((event: any) => event.action)
        assert.includeMembers(actions, [
          "assistant.created",
          "assistant.paused",
          "assistant.resumed",
          "assistant_credential.set",
          "assistant_credential.resolved"
        ])
        const resolvedBy = audit.json.data.find(
          (event: any) => event.action === "assistant_credential.resolved"
        )
        assert.include(resolvedBy.actor, { type: "assistant", id })

        yield* api("POST", `/v1/assistants/${id}/pause`, { key })
      }),
    120_000
  )

  it.effect(
    "the default image's example runtime follows the contract: state, a credential, usage, an intent",
    () =>
      Effect.gen(function* () {
        const { key } = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        yield* api("PUT", "/v1/assistants/credentials", { key, body: { name: "model_key", value: SECRET } })
        const created = yield* api("POST", "/v1/assistants", {
          key,
          body: {
            name: "example",
            config: {
              command: "rbs-assistant-example",
              env: {
                RBS_EXAMPLE_CREDENTIAL: "model_key",
                RBS_EXAMPLE_PATCH: JSON.stringify({ model: "large" })
              }
            }
          }
        })
        assert.strictEqual(created.status, 201, created.text)
        const id = created.json.id as string
        const booted = yield* waitForState(key, id, (state) => state.boots === 1)
        assert.deepStrictEqual(booted.json.state, {
          boots: 1,
          home_boots: 1,
          credential: {
            name: "model_key",
            scope: "account",
            sha256: Crypto.createHash("sha256").update(SECRET).digest("hex")
          }
        })
        const events = yield* api("GET", `/v1/assistants/${id}/usage-events`, { key })
        assert.lengthOf(events.json.data, 1)
        const intents = yield* api("GET", `/v2/assistants/${id}/config-intents`, { key })
        assert.lengthOf(intents.json.data, 1)
        assert.include(intents.json.data[0], { status: "pending", proposed_by: `assistant:${id}` })
        assert.deepStrictEqual(intents.json.data[0].patch, { model: "large" })
        yield* api("POST", `/v1/assistants/${id}/pause`, { key })
      })
  )

  it.effect(
    "config intents: approved atomically on their version, denied, expired, each sent as a webhook event",
    () =>
      Effect.gen(function* () {
        const user = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
        const key = user.key
        const receiver = yield* WebhookReceiver.serve
        const hook = yield* api("POST", "/v1/webhooks", {
          key,
          body: {
            url: receiver.url,
            events: [
              "config_intent.proposed",
              "config_intent.approved",
              "config_intent.denied",
              "config_intent.expired"
            ]
          }
        })
        assert.strictEqual(hook.status, 201, hook.text)
        const created = yield* api("POST", "/v1/assistants", {
          key,
          body: { name: "planner", config: { model: "s" } }
        })
        const id = created.json.id as string
        yield* api("POST", `/v1/assistants/${id}/pause`, { key })
        const propose = (patch: object, extra: object = {}) =>
          api("POST", `/v2/assistants/${id}/config-intents`, { key, body: { patch, ...extra } })
        const a = yield* propose({ model: "m", temperature: 0.2 })
        const b = yield* propose({ model: "l" })
        const c = yield* propose({ tools: ["search"] })
        const d = yield* propose({ model: null }, { expires_in_seconds: 60 })
        for (const each of [a, b, c, d]) assert.strictEqual(each.status, 201, each.text)
        const bad = yield* propose({ command: 5 })
        assert.strictEqual(bad.status, 400, bad.text)
        assert.strictEqual(bad.json.error.message, "Invalid value for field: patch.")
        const path = (intent: any, verb = "") =>
          `/v2/assistants/${id}/config-intents/${intent.json.id}${verb}`

        const approvedA = yield* api("POST", path(a, "/approve"), { key })
        assert.strictEqual(approvedA.status, 200, approvedA.text)
        const after = yield* api("GET", `/v1/assistants/${id}`, { key })
        assert.deepStrictEqual(after.json.config, { model: "m", temperature: 0.2 })
        // B was proposed on the version A replaced: it cannot be applied over A.
        const staleB = yield* api("POST", path(b, "/approve"), { key })
        assert.strictEqual(staleB.status, 409, staleB.text)
        assert.strictEqual(staleB.json.error.code, "intent_conflict")
        const deniedB = yield* api("POST", path(b, "/deny"), { key, body: { note: "stale" } })
        assert.include(deniedB.json, { status: "denied", decision_note: "stale", applied_version: null })
        assert.deepStrictEqual(
          (yield* api("GET", `/v1/assistants/${id}`, { key })).json.config,
          after.json.config
        )

        // D's time runs out: reads say so at once, a decision is refused, and the supervisor's sweep
        // alone writes the transition (the row, the audit event, the webhook event).
        const sql = yield* SqlClient.SqlClient
        const rowStatus = sql<{ readonly status: string }>`
          SELECT status FROM assistant_config_intents WHERE id = ${d.json.id}`.pipe(
          Effect.map((rows) => rows[0]?.status)
        )
        const expiredEvents = api("GET", "/v1/audit/events?action=config_intent.expired", {
          cookie: user.cookie
        })
        // The sweep takes due intents FOR UPDATE SKIP LOCKED: a KEY SHARE lock on D keeps it off D
        // (and lets the UPDATE of its expires_at through), so what follows sees reads on their own.
        const locked = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const holder = yield* sql
          .withTransaction(
            sql`SELECT id FROM assistant_config_intents WHERE id = ${d.json.id} FOR KEY SHARE`.pipe(
              Effect.andThen(Deferred.succeed(locked, undefined)),
              Effect.andThen(Deferred.await(release))
            )
          )
          .pipe(Effect.forkChild)
        yield* Deferred.await(locked)
        yield* sql`UPDATE assistant_config_intents SET expires_at = now() - interval '1 second' WHERE id = ${d.json.id}`
        const expired = yield* api("GET", path(d), { key })
        assert.include(expired.json, { status: "expired", decided_at: expired.json.expires_at })
        const pending = yield* api("GET", `/v2/assistants/${id}/config-intents?status=pending`, { key })
        assert.deepStrictEqual(
          pending.json.data.map((intent: any) => intent.id),
          [c.json.id]
        )
        const listedExpired = yield* api("GET", `/v2/assistants/${id}/config-intents?status=expired`, { key })
        assert.deepStrictEqual(
          listedExpired.json.data.map((intent: any) => [intent.id, intent.status]),
          [[d.json.id, "expired"]]
        )
        assert.strictEqual(yield* rowStatus, "pending")
        assert.deepStrictEqual((yield* expiredEvents).json.data, [])
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        const refused = yield* api("POST", path(d, "/approve"), { key })
        assert.strictEqual(refused.status, 409, refused.text)
        assert.strictEqual(refused.json.error.message, "The intent is expired already.")
        // A proposal wakes the sweeps for its expiry; D's was moved behind their back: wake them as it would.
        yield* sql`SELECT pg_notify(${WAKE_CHANNEL}, '')`
        const deadline = Date.now() + 10_000
        while ((yield* rowStatus) !== "expired") {
          assert.isBelow(Date.now(), deadline, "the sweep never expired the intent")
          yield* Effect.sleep("100 millis")
        }
        const audited = (yield* expiredEvents).json.data
        assert.lengthOf(audited, 1)
        assert.deepInclude(audited[0], {
          actor: { type: "system", id: null, user_id: null },
          target: { type: "assistant", id },
          details: { intent_id: d.json.id }
        })

        // The sweep sleeps until the next expiry it knows of: C's, brought 1.5 s close and announced as a
        // proposal would, is not due when that wake-up sweeps; the sweep must wake by itself when it is.
        yield* sql`UPDATE assistant_config_intents SET expires_at = now() + interval '1.5 seconds' WHERE id = ${c.json.id}`
        yield* sql`SELECT pg_notify(${WAKE_CHANNEL}, '')`
        const cStatus = sql<{ readonly status: string }>`
          SELECT status FROM assistant_config_intents WHERE id = ${c.json.id}`.pipe(
          Effect.map((rows) => rows[0]?.status)
        )
        const cDeadline = Date.now() + 10_000
        while ((yield* cStatus) !== "expired") {
          assert.isBelow(Date.now(), cDeadline, "the sweep did not wake for the next expiry")
          yield* Effect.sleep("100 millis")
        }

        // Pages of three, newest first: the cursor leads to the rest.
        const paged = yield* api("GET", `/v2/assistants/${id}/config-intents?limit=3`, { key })
        assert.lengthOf(paged.json.data, 3)
        assert.isTrue(paged.json.has_more)
        const rest = yield* api(
          "GET",
          `/v2/assistants/${id}/config-intents?limit=3&cursor=${paged.json.next_cursor}`,
          { key }
        )
        assert.include(rest.json, { has_more: false, next_cursor: null })
        assert.sameMembers(
          [...paged.json.data, ...rest.json.data].map((intent: any) => intent.id),
          [a, b, c, d].map((intent) => intent.json.id)
        )
        const badCursor = yield* api("GET", `/v2/assistants/${id}/config-intents?cursor=nope`, { key })
        assert.strictEqual(badCursor.status, 400, badCursor.text)
        assert.strictEqual(badCursor.json.error.message, "Invalid value for field: cursor.")
        // A cursor of the right form whose id names no row of this list is refused the same way.
        const forged = Buffer.from(JSON.stringify([new Date().toISOString(), "not-an-id"])).toString(
          "base64url"
        )
        const forgedCursor = yield* api("GET", `/v2/assistants/${id}/config-intents?cursor=${forged}`, {
          key
        })
        assert.strictEqual(forgedCursor.status, 400, forgedCursor.text)

        // Every step went out as a webhook event.
        yield* receiver.waitFor(8)
        const types = receiver.received.map((request) => JSON.parse(request.body).type).sort()
        assert.deepStrictEqual(types, [
          "config_intent.approved",
          "config_intent.denied",
          "config_intent.expired",
          "config_intent.expired",
          "config_intent.proposed",
          "config_intent.proposed",
          "config_intent.proposed",
          "config_intent.proposed"
        ])
      })
  )

  it.effect("validates input, keeps names unique, and keeps accounts apart", () =>
    Effect.gen(function* () {
      const a = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
      const b = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
      const bad = [
        [{ name: "Not A Slug" }, "name"],
        [{ name: "x", config: { command: 5 } }, "config.command"],
        [{ name: "x", config: { env: { "1BAD": "v" } } }, "config.env"],
        [{ name: "x", image: "no-such-image" }, "image"]
      ] as const
      for (const [body, field] of bad) {
        const refused = yield* api("POST", "/v1/assistants", { key: a.key, body })
        assert.strictEqual(refused.status, 400, refused.text)
        assert.strictEqual(refused.json.error.message, `Invalid value for field: ${field}.`)
      }
      const created = yield* api("POST", "/v1/assistants", { key: a.key, body: { name: "idle" } })
      assert.strictEqual(created.status, 201, created.text)
      const id = created.json.id
      const again = yield* api("POST", "/v1/assistants", { key: a.key, body: { name: "idle" } })
      assert.strictEqual(again.status, 409, again.text)
      assert.strictEqual(again.json.error.code, "assistant_conflict")
      // Renamed onto another's name: the unique index refuses it, answered as the create's conflict.
      const busy = yield* api("POST", "/v1/assistants", { key: a.key, body: { name: "busy" } })
      assert.strictEqual(busy.status, 201, busy.text)
      const onto = yield* api("PATCH", `/v1/assistants/${id}`, { key: a.key, body: { name: "busy" } })
      assert.strictEqual(onto.status, 409, onto.text)
      assert.deepStrictEqual(onto.json.error, {
        code: "assistant_conflict",
        message: "An assistant named busy exists already."
      })
      const patched = yield* api("PATCH", `/v1/assistants/${id}`, {
        key: a.key,
        body: { config: { model: "large" } }
      })
      assert.strictEqual(patched.status, 200, patched.text)
      assert.include(patched.json, { config_version: 2 })
      assert.deepStrictEqual(patched.json.config, { model: "large" })
      for (const [method, path] of [
        ["GET", `/v1/assistants/${id}`],
        ["PATCH", `/v1/assistants/${id}`],
        ["POST", `/v1/assistants/${id}/pause`],
        ["GET", `/v1/assistants/${id}/runtime-state`]
      ] as const) {
        const other = yield* api(method, path, { key: b.key, ...(method === "PATCH" ? { body: {} } : {}) })
        assert.strictEqual(other.status, 404, `${method} ${path}: ${other.text}`)
      }
      assert.deepStrictEqual((yield* api("GET", "/v1/assistants", { key: b.key })).json.data, [])
      // Channels: bound, unbound once; names unique.
      const channel = yield* api("POST", `/v1/assistants/${id}/channels`, {
        key: a.key,
        body: { kind: "slack", name: "team" }
      })
      assert.strictEqual(channel.status, 201, channel.text)
      assert.strictEqual(channel.json.has_secret, false)
      const twice = yield* api("POST", `/v1/assistants/${id}/channels`, {
        key: a.key,
        body: { kind: "slack", name: "team" }
      })
      assert.strictEqual(twice.status, 409, twice.text)
      const badKind = yield* api("POST", `/v1/assistants/${id}/channels`, {
        key: a.key,
        body: { kind: "pigeon", name: "x" }
      })
      assert.strictEqual(badKind.status, 400, badKind.text)
      assert.strictEqual(
        (yield* api("DELETE", `/v1/assistants/${id}/channels/${channel.json.id}`, { key: b.key })).status,
        404
      )
      assert.strictEqual(
        (yield* api("DELETE", `/v1/assistants/${id}/channels/${channel.json.id}`, { key: a.key })).status,
        204
      )
      assert.strictEqual(
        (yield* api("DELETE", `/v1/assistants/${id}/channels/${channel.json.id}`, { key: a.key })).status,
        404
      )
      // Usage events: a member may report too; bad figures are refused by name.
      for (const [body, field] of [
        [{ model: "m", input_tokens: -1, output_tokens: 0 }, "input_tokens"],
        [{ model: "", input_tokens: 1, output_tokens: 0 }, "model"],
        [
          { model: "m", input_tokens: 1, output_tokens: 0, occurred_at: "2001-01-01T00:00:00Z" },
          "occurred_at"
        ]
      ] as const) {
        const refused = yield* api("POST", `/v1/assistants/${id}/usage-events`, { key: a.key, body })
        assert.strictEqual(refused.status, 400, refused.text)
        assert.strictEqual(refused.json.error.message, `Invalid value for field: ${field}.`)
      }
      for (let i = 0; i < 3; i++) {
        const posted = yield* api("POST", `/v1/assistants/${id}/usage-events`, {
          key: a.key,
          body: { model: `m${i}`, input_tokens: i, output_tokens: i }
        })
        assert.strictEqual(posted.status, 201, posted.text)
      }
      const firstPage = yield* api("GET", `/v1/assistants/${id}/usage-events?limit=2`, { key: a.key })
      assert.deepStrictEqual(
        firstPage.json.data.map((event: any) => event.model),
        ["m2", "m1"]
      )
      const secondPage = yield* api(
        "GET",
        `/v1/assistants/${id}/usage-events?limit=2&cursor=${firstPage.json.next_cursor}`,
        { key: a.key }
      )
      assert.deepStrictEqual(
        secondPage.json.data.map((event: any) => event.model),
        ["m0"]
      )
      assert.isFalse(secondPage.json.has_more)
      const crossCredential = yield* api("PUT", "/v1/assistants/credentials", {
        key: b.key,
        body: { name: "k", value: "v", assistant_id: id }
      })
      assert.strictEqual(crossCredential.status, 404, crossCredential.text)
      yield* api("POST", `/v1/assistants/${id}/pause`, { key: a.key })
    })
  )
})
