import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import puppeteer from "puppeteer-core"
import { isReady, PNG_SIGNATURE, pngSize, request, signUp, waitForSession } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"

layer(TestService.layer({ browserPoolSize: 2 }), { excludeTestServices: true })("sessions API", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  const account = Effect.flatMap(TestService.TestService, (service) => signUp(service.baseUrl))

  const readySession = (key: string, body: object = {}) =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const created = yield* api("POST", "/v1/sessions", { key, body })
      assert.strictEqual(created.status, 201, created.text)
      return yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
    })

  describe("POST /v1/sessions", () => {
    it.effect("answers 201 with the short shape, status creating, and becomes ready", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* account
        const created = yield* api("POST", "/v1/sessions", { key, body: { ttl_seconds: 120 } })
        assert.strictEqual(created.status, 201)
        assert.deepStrictEqual(Object.keys(created.json).sort(), [
          "cdp_url",
          "created_at",
          "expires_at",
          "id",
          "object",
          "status"
        ])
        assert.match(created.json.id, /^sess_[0-9a-f-]{36}$/)
        assert.strictEqual(created.json.object, "session")
        assert.strictEqual(created.json.status, "creating")
        assert.strictEqual(created.json.cdp_url, `${service.wsBase}/sessions/${created.json.id}`)
        const ttl = Date.parse(created.json.expires_at) - Date.parse(created.json.created_at)
        assert.strictEqual(ttl, 120_000)

        const ready = yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
        assert.isString(ready.ready_at)
        assert.match(ready.device, /^Chromium \d+ headless, 1280x720$/)
      })
    )

    it.effect("defaults to a 1800 s TTL, with or without a body", () =>
      Effect.gen(function* () {
        const { key } = yield* account
        for (const options of [{ body: {} }, {}]) {
          const created = yield* api("POST", "/v1/sessions", { key, ...options })
          assert.strictEqual(created.status, 201, created.text)
          assert.strictEqual(
            Date.parse(created.json.expires_at) - Date.parse(created.json.created_at),
            1_800_000
          )
          assert.strictEqual((yield* api("DELETE", `/v1/sessions/${created.json.id}`, { key })).status, 204)
        }
      })
    )

    it.effect("rejects ttl_seconds out of range or of the wrong type with invalid_field", () =>
      Effect.gen(function* () {
        const { key } = yield* account
        for (const ttl_seconds of [59, 3601, 100.5, "600", null]) {
          const response = yield* api("POST", "/v1/sessions", { key, body: { ttl_seconds } })
          assert.strictEqual(response.status, 400, String(ttl_seconds))
          assert.deepStrictEqual(response.json, {
            error: { code: "invalid_field", message: "Invalid value for field: ttl_seconds." }
          })
        }
        const profile = yield* api("POST", "/v1/sessions", { key, body: { profile: 5 } })
        assert.strictEqual(profile.json.error.message, "Invalid value for field: profile.")
      })
    )

    it.effect(
      "refuses a session_type it does not know, and fields of the other kind, instead of guessing",
      () =>
        Effect.gen(function* () {
          const { key } = yield* account
          for (const session_type of ["container", "BROWSER", 1]) {
            const response = yield* api("POST", "/v1/sessions", { key, body: { session_type } })
            assert.strictEqual(response.status, 400, String(session_type))
            assert.deepStrictEqual(response.json, {
              error: { code: "invalid_field", message: "Invalid value for field: session_type." }
            })
          }
          const image = yield* api("POST", "/v1/sessions", {
            key,
            body: { session_type: "browser", image: "debian" }
          })
          assert.deepStrictEqual(image.json, {
            error: { code: "invalid_field", message: "Invalid value for field: image." }
          })
          const recorded = yield* api("POST", "/v1/sessions", {
            key,
            body: { session_type: "sandbox", recording: true }
          })
          assert.deepStrictEqual(recorded.json, {
            error: { code: "invalid_field", message: "Invalid value for field: recording." }
          })
          const listed = yield* api("GET", "/v1/sessions", { key })
          assert.deepStrictEqual(listed.json.data, [], "nothing was created")
          const browser = yield* api("POST", "/v1/sessions", { key, body: { session_type: "browser" } })
          assert.strictEqual(browser.status, 201, browser.text)
          assert.strictEqual((yield* api("DELETE", `/v1/sessions/${browser.json.id}`, { key })).status, 204)
        })
    )

    it.effect(
      "refuses a field it does not know by name, a misspelling or a feature it lacks, and creates nothing",
      () =>
        Effect.gen(function* () {
          const { key } = yield* account
          for (const [body, field] of [
            [{ ttl: 600 }, "ttl"],
            [{ ttl_seconds: 600, user_agnet: "x" }, "user_agnet"],
            [{ fingerprint: { os: "windows" } }, "fingerprint"]
          ] as const) {
            const response = yield* api("POST", "/v1/sessions", { key, body })
            assert.strictEqual(response.status, 400, JSON.stringify(body))
            assert.deepStrictEqual(response.json, {
              error: { code: "invalid_field", message: `Invalid value for field: ${field}.` }
            })
          }
          const listed = yield* api("GET", "/v1/sessions", { key })
          assert.deepStrictEqual(listed.json.data, [], "nothing was created")
        })
    )

    it.effect(
      "keeps metadata given at create, shows it on the session, and lists only the sessions holding each pair asked for",
      () =>
        Effect.gen(function* () {
          const { key } = yield* account
          const make = (metadata?: Record<string, string>) =>
            Effect.map(
              api("POST", "/v1/sessions", {
                key,
                body:
                  metadata === undefined ? { session_type: "sandbox" } : { session_type: "sandbox", metadata }
              }),
              (created) => {
                assert.strictEqual(created.status, 201, created.text)
                return created.json.id as string
              }
            )
          const alice = yield* make({ job: "42", user: "alice", "run.id": "a:b" })
          const bob = yield* make({ job: "42", user: "bob" })
          const none = yield* make()
          const shown = yield* api("GET", `/v1/sessions/${alice}`, { key })
          assert.deepStrictEqual(shown.json.metadata, { job: "42", user: "alice", "run.id": "a:b" })
          assert.deepStrictEqual((yield* api("GET", `/v1/sessions/${none}`, { key })).json.metadata, {})
          const ids = (query: string) =>
            Effect.map(api("GET", `/v1/sessions?${query}`, { key }), (listed) => {
              assert.strictEqual(listed.status, 200, listed.text)
              return listed.json.data.map((session: any) => session.id)
            })
          assert.deepStrictEqual(yield* ids("metadata=job:42"), [bob, alice])
          assert.deepStrictEqual(yield* ids("metadata=job:42&metadata=user:alice"), [alice])
          assert.deepStrictEqual(yield* ids(`metadata=${encodeURIComponent("run.id:a:b")}`), [alice])
          assert.deepStrictEqual(
            yield* ids("metadata=user:alice&metadata=user:bob"),
            [],
            "one key, two values"
          )
          assert.deepStrictEqual(yield* ids("metadata=job:43"), [])
          assert.deepStrictEqual(
            yield* ids("metadata=job:42&limit=1").pipe(Effect.map((page) => page.length)),
            1
          )
          const tooMany = Array.from({ length: 51 }, (_, index) => `metadata=k${index}:v`).join("&")
          for (const query of ["metadata=job", "metadata=:42", "metadata=a%20b:1", tooMany]) {
            const refused = yield* api("GET", `/v1/sessions?${query}`, { key })
            assert.deepStrictEqual(
              refused.json,
              { error: { code: "invalid_field", message: "Invalid value for field: metadata." } },
              query
            )
          }
          for (const metadata of [
            Object.fromEntries(Array.from({ length: 51 }, (_, index) => [`k${index}`, "v"])),
            { ["k".repeat(41)]: "v" },
            { "a b": "v" },
            { job: "x".repeat(501) },
            { job: 42 },
            ["job", "42"]
          ]) {
            const refused = yield* api("POST", "/v1/sessions", {
              key,
              body: { session_type: "sandbox", metadata }
            })
            assert.deepStrictEqual(
              refused.json,
              { error: { code: "invalid_field", message: "Invalid value for field: metadata." } },
              JSON.stringify(metadata).slice(0, 60)
            )
          }
          for (const id of [alice, bob, none])
            assert.strictEqual((yield* api("DELETE", `/v1/sessions/${id}`, { key })).status, 204)
        })
    )

    it.effect("rejects malformed JSON, a non-object body and a non-JSON content type", () =>
      Effect.gen(function* () {
        const { key } = yield* account
        const malformed = yield* api("POST", "/v1/sessions", { key, rawBody: '{"ttl_seconds":' })
        assert.strictEqual(malformed.status, 400)
        assert.deepStrictEqual(malformed.json, {
          error: { code: "invalid_request", message: "Request body is malformed." }
        })
        const array = yield* api("POST", "/v1/sessions", { key, rawBody: "[1,2]" })
        assert.strictEqual(array.status, 400)
        assert.strictEqual(array.json.error.code, "invalid_request")
        const text = yield* api("POST", "/v1/sessions", { key, rawBody: "ttl=60", contentType: "text/plain" })
        assert.strictEqual(text.status, 415)
        assert.strictEqual(text.json.error.code, "unsupported_media_type")
        const sql = yield* SqlClient.SqlClient
        const [count] = yield* sql<{
          n: string
        }>`SELECT count(*)::text AS n FROM sessions s JOIN api_keys k ON k.id = s.api_key_id WHERE k.prefix = ${key.slice(0, 12)}`
        assert.strictEqual(count!.n, "0", "no row is written for a rejected request")
      })
    )
  })

  describe("GET /v1/sessions/{id}", () => {
    it.effect("returns the full superset shape", () =>
      Effect.gen(function* () {
        const { key } = yield* account
        const session = yield* readySession(key)
        const got = yield* api("GET", `/v1/sessions/${session.id}`, { key })
        assert.strictEqual(got.status, 200)
        assert.deepStrictEqual(Object.keys(got.json).sort(), [
          "active_connection_leases",
          "block_ads",
          "bytes_down",
          "bytes_up",
          "cdp_url",
          "created_at",
          "device",
          "ended_at",
          "ended_reason",
          "endpoints",
          "expires_at",
          "extensions",
          "id",
          "idle_timeout_seconds",
          "image",
          "isolation",
          "locale",
          "logs",
          "metadata",
          "object",
          "persistence",
          "proxy",
          "proxy_ip",
          "proxy_region",
          "ready_at",
          "recording",
          "resources",
          "session_type",
          "status",
          "timezone",
          "user_agent",
          "viewport",
          "workspace_id"
        ])
        assert.strictEqual(got.json.session_type, "browser")
        assert.strictEqual(got.json.isolation, "browser")
        assert.isNull(got.json.image)
        assert.isNull(got.json.resources, "a browser has no sandbox resources")
        assert.deepStrictEqual(got.json.endpoints, {
          control: got.json.cdp_url,
          video: `${got.json.cdp_url}/preview`
        })
        assert.strictEqual(got.json.bytes_up, 0)
        assert.isNull(got.json.ended_at)
        assert.strictEqual(got.json.active_connection_leases, 0)
      })
    )

    it.effect("answers 404 session_not_found for an unknown id and for another account's session", () =>
      Effect.gen(function* () {
        const owner = yield* account
        const other = yield* account
        const session = yield* readySession(owner.key)
        const notFound = { error: { code: "session_not_found", message: "Session not found." } }
        for (const id of ["sess_00000000-0000-0000-0000-000000000000", "garbage"]) {
          const response = yield* api("GET", `/v1/sessions/${id}`, { key: owner.key })
          assert.deepStrictEqual([response.status, response.json], [404, notFound])
        }
        const routes = [
          ["GET", ""],
          ["DELETE", ""],
          ["POST", "/screenshot"],
          ["POST", "/preview-token"],
          ["POST", "/resize"]
        ] as const
        for (const [method, suffix] of routes) {
          const body =
            suffix === "/resize" ? { cols: 800, rows: 600 } : suffix === "/preview-token" ? {} : undefined
          const response = yield* api(method, `/v1/sessions/${session.id}${suffix}`, {
            key: other.key,
            ...(body === undefined ? {} : { body })
          })
          assert.deepStrictEqual([response.status, response.json], [404, notFound], `${method} ${suffix}`)
        }
        const still = yield* api("GET", `/v1/sessions/${session.id}`, { key: owner.key })
        assert.strictEqual(still.json.status, "ready", "another account cannot close it")
      })
    )
  })

  describe("GET /v1/sessions", () => {
    it.effect("pages newest first with an opaque cursor", () =>
      Effect.gen(function* () {
        const { key } = yield* account
        const ids: Array<string> = []
        for (let i = 0; i < 5; i++) {
          const created = yield* api("POST", "/v1/sessions", { key, body: {} })
          ids.push(created.json.id)
          yield* api("DELETE", `/v1/sessions/${created.json.id}`, { key })
        }
        const seen: Array<string> = []
        let cursor: string | null = null
        let pages = 0
        do {
          const query: string = cursor === null ? "?limit=2" : `?limit=2&cursor=${cursor}`
          const page = yield* api("GET", `/v1/sessions${query}`, { key })
          assert.strictEqual(page.status, 200)
          assert.strictEqual(page.json.object, "list")
          assert.isAtMost(page.json.data.length, 2)
          seen.push(...page.json.data.map((s: any) => s.id))
          assert.strictEqual(page.json.has_more, page.json.next_cursor !== null)
          cursor = page.json.next_cursor
          pages++
        } while (cursor !== null)
        assert.strictEqual(pages, 3)
        assert.deepStrictEqual(seen, [...ids].reverse())

        const all = yield* api("GET", "/v1/sessions", { key })
        assert.strictEqual(all.json.data.length, 5)
        assert.isFalse(all.json.has_more)
      })
    )

    it.effect("rejects a limit outside 1..100 and a bad cursor with invalid_field", () =>
      Effect.gen(function* () {
        const { key } = yield* account
        for (const [query, field] of [
          ["limit=0", "limit"],
          ["limit=101", "limit"],
          ["limit=abc", "limit"],
          ["limit=2.5", "limit"],
          ["cursor=not-a-cursor", "cursor"]
        ]) {
          const response = yield* api("GET", `/v1/sessions?${query}`, { key })
          assert.strictEqual(response.status, 400, query)
          assert.deepStrictEqual(response.json, {
            error: { code: "invalid_field", message: `Invalid value for field: ${field}.` }
          })
        }
        assert.strictEqual((yield* api("GET", "/v1/sessions?limit=100", { key })).status, 200)
      })
    )

    it.effect("lists only the caller's account", () =>
      Effect.gen(function* () {
        const a = yield* account
        const b = yield* account
        const created = yield* api("POST", "/v1/sessions", { key: a.key, body: {} })
        const list = yield* api("GET", "/v1/sessions", { key: b.key })
        assert.deepStrictEqual(list.json.data, [])
        yield* api("DELETE", `/v1/sessions/${created.json.id}`, { key: a.key })
      })
    )
  })

  describe("DELETE /v1/sessions/{id}", () => {
    it.effect("closes with client_delete, then answers 409 session_not_open", () =>
      Effect.gen(function* () {
        const { key } = yield* account
        const session = yield* readySession(key)
        const deleted = yield* api("DELETE", `/v1/sessions/${session.id}`, { key })
        assert.strictEqual(deleted.status, 204)
        assert.strictEqual(deleted.text, "")
        const got = yield* api("GET", `/v1/sessions/${session.id}`, { key })
        assert.strictEqual(got.json.status, "closed")
        assert.strictEqual(got.json.ended_reason, "client_delete")
        assert.isString(got.json.ended_at)
        const again = yield* api("DELETE", `/v1/sessions/${session.id}`, { key })
        assert.strictEqual(again.status, 409)
        assert.deepStrictEqual(again.json, {
          error: { code: "session_not_open", message: "Session is already in a terminal state." }
        })
        for (const suffix of ["/screenshot", "/preview-token"]) {
          const response = yield* api("POST", `/v1/sessions/${session.id}${suffix}`, { key, body: {} })
          assert.deepStrictEqual([response.status, response.json.error.code], [409, "session_not_open"])
        }
        // The trail: created, deleted (in the transaction that closed it), then the refused attempts.
        const trail = yield* api("GET", `/v1/audit/events?target=${session.id}`, { key })
        assert.deepStrictEqual(
          trail.json.data.map((e: any) => [e.action, e.outcome, e.details.code ?? null]).reverse(),
          [
            ["session.created", "success", null],
            ["session.deleted", "success", null],
            ["session.deleted", "failure", "session_not_open"],
            ["session.preview_token_issued", "failure", "session_not_open"]
          ]
        )
        const deletedEvent = trail.json.data.find(
          (e: any) => e.action === "session.deleted" && e.outcome === "success"
        )
        assert.strictEqual(deletedEvent.actor.type, "api_key")
        assert.isNotNull(deletedEvent.ip)
      })
    )
  })

  describe("screenshot, preview token, resize", () => {
    it.effect(
      "every browser opens at 1280x720, those launched once the pool knows its frame height (taken, not measured again) too",
      () =>
        Effect.gen(function* () {
          const { key } = yield* account
          // Pool of 2: the third session on is served by browsers launched with a settled frame height.
          for (let i = 0; i < 4; i++) {
            const session = yield* readySession(key)
            const shot = yield* api("POST", `/v1/sessions/${session.id}/screenshot`, { key })
            assert.deepStrictEqual(pngSize(shot.bytes), { width: 1280, height: 720 }, `session ${i + 1}`)
            assert.strictEqual((yield* api("DELETE", `/v1/sessions/${session.id}`, { key })).status, 204)
          }
        })
    )

    it.effect("screenshot is a raw PNG of the page the client is on", () =>
      Effect.gen(function* () {
        const { key } = yield* account
        const page = yield* LocalPage.serve
        const session = yield* readySession(key)
        const blank = yield* api("POST", `/v1/sessions/${session.id}/screenshot`, { key })
        assert.strictEqual(blank.status, 200)
        assert.strictEqual(blank.headers.get("content-type"), "image/png")
        assert.deepStrictEqual([...blank.bytes.slice(0, 8)], PNG_SIGNATURE)
        assert.deepStrictEqual(pngSize(blank.bytes), { width: 1280, height: 720 })

        const browser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: session.cdp_url,
            headers: { authorization: `Bearer ${key}` }
          })
        )
        const [tab] = yield* Effect.promise(() => browser.pages())
        yield* Effect.promise(() => tab!.goto(`${page}?title=blue`))
        const blue = yield* api("POST", `/v1/sessions/${session.id}/screenshot`, { key })
        yield* Effect.promise(() => browser.disconnect())
        assert.strictEqual(blue.status, 200)
        assert.notDeepEqual(blue.bytes, blank.bytes, "the screenshot shows the navigated page")
      })
    )

    it.effect("preview-token mints a signed, expiring stream URL and requires an empty body", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* account
        const session = yield* readySession(key)
        const minted = yield* api("POST", `/v1/sessions/${session.id}/preview-token`, { key, body: {} })
        assert.strictEqual(minted.status, 200)
        assert.deepStrictEqual(Object.keys(minted.json).sort(), ["expires_at", "fps", "input_enabled", "url"])
        assert.strictEqual(minted.json.fps, 5)
        assert.isTrue(minted.json.input_enabled)
        const prefix = `${service.wsBase}/sessions/${session.id}/preview?token=`
        assert.isTrue(minted.json.url.startsWith(prefix), minted.json.url)
        assert.match(minted.json.url.slice(prefix.length), /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/)
        const expiresIn = Date.parse(minted.json.expires_at) - Date.now()
        assert.isTrue(expiresIn > 0 && expiresIn <= 10 * 60_000)

        const extra = yield* api("POST", `/v1/sessions/${session.id}/preview-token`, {
          key,
          body: { fps: 30 }
        })
        assert.deepStrictEqual([extra.status, extra.json.error.code], [400, "invalid_request"])
      })
    )

    it.effect("resize sets the viewport in CSS pixels and rejects out-of-range sizes", () =>
      Effect.gen(function* () {
        const { key } = yield* account
        const session = yield* readySession(key)
        const resized = yield* api("POST", `/v1/sessions/${session.id}/resize`, {
          key,
          body: { cols: 800, rows: 600 }
        })
        assert.deepStrictEqual([resized.status, resized.json], [200, {}])
        const shot = yield* api("POST", `/v1/sessions/${session.id}/screenshot`, { key })
        assert.deepStrictEqual(pngSize(shot.bytes), { width: 800, height: 600 })

        const browser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: session.cdp_url,
            headers: { authorization: `Bearer ${key}` },
            defaultViewport: null
          })
        )
        const [tab] = yield* Effect.promise(() => browser.pages())
        const size = yield* Effect.promise(() =>
          tab!.evaluate(() => [(globalThis as any).innerWidth, (globalThis as any).innerHeight])
        )
        yield* Effect.promise(() => browser.disconnect())
        assert.deepStrictEqual(size, [800, 600])

        for (const [body, field] of [
          [{ cols: 10, rows: 600 }, "cols"],
          [{ cols: 800, rows: 100_000 }, "rows"],
          [{ cols: "800", rows: 600 }, "cols"],
          [{ cols: 800 }, "rows"]
        ] as const) {
          const response = yield* api("POST", `/v1/sessions/${session.id}/resize`, { key, body })
          assert.strictEqual(response.status, 400, JSON.stringify(body))
          assert.deepStrictEqual(response.json, {
            error: { code: "invalid_field", message: `Invalid value for field: ${field}.` }
          })
        }
      })
    )
  })

  describe("metrics", () => {
    it.effect("exposes sessions by status, pool size and the create-to-ready histogram", () =>
      Effect.gen(function* () {
        const { key } = yield* account
        yield* readySession(key)
        const metrics = yield* api("GET", "/metrics")
        assert.strictEqual(metrics.status, 200)
        assert.include(metrics.headers.get("content-type")!, "text/plain")
        assert.match(metrics.text, /rbs_sessions\{status="ready"\} [1-9]/)
        assert.match(metrics.text, /rbs_browser_pool_idle \d+/)
        // The pool's warm-hit rate: acquires by result, and what it aims for.
        assert.match(metrics.text, /rbs_browser_pool_acquires_total\{result="(warm|cold)"\} [1-9]/)
        assert.match(metrics.text, /rbs_browser_pool_target [0-9]+/)
        assert.match(metrics.text, /rbs_browser_launch_seconds_count [1-9]/)
        assert.match(metrics.text, /rbs_browsers [1-9]/)
        assert.match(metrics.text, /rbs_session_create_to_ready_seconds_count [1-9]/)
        assert.match(metrics.text, /rbs_session_create_to_ready_seconds_bucket\{le="0.1"\} \d+/)
      })
    )
  })
})
