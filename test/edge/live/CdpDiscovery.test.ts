import { assert, layer } from "@effect/vitest"
import CDP from "chrome-remote-interface"
import { Effect } from "effect"
import { chromium } from "playwright-core"
import type WebSocket from "ws"
import { metricValue, openSession, request, signUp } from "../../support/Client.ts"
import { cdpCall, rawConnect } from "../../support/CdpChecks.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"

// DevTools discovery over HTTP (`/sessions/{id}/json/version`, `/json/list`,
// `/json`) and the page relay its pages name, with real clients on a real
// Chromium through the service.

/** Listens for the close frame now, so a close that comes before the await is not missed. */
const closeOf = (socket: WebSocket) => {
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.once("close", (code, reason) => resolve({ code, reason: reason.toString() }))
  )
  return Effect.promise(() => closed)
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

/** The connect token `url` carries, checked to be `base` with only that in its query. */
const connectTokenOf = (url: string, base: string) => {
  const parsed = new URL(url)
  assert.strictEqual(`${parsed.origin}${parsed.pathname}`, base)
  assert.deepStrictEqual([...parsed.searchParams.keys()], ["token"])
  const token = parsed.searchParams.get("token")!
  assert.match(token, /^rbs_cdp_[\w-]+\.[\w-]+$/)
  return token
}

layer(TestService.layer({ browserPoolSize: 1, contextStandby: false }), { excludeTestServices: true })(
  "DevTools discovery",
  (it) => {
    const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
      Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

    /** An account with a ready session (a browser of its own unless `body` says otherwise). */
    const setup = (body: object = {}) =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const session = yield* openSession(service.baseUrl, account.key, body)
        return { service, account, session }
      })

    /** The session's pages as `/json/list` lists them. */
    const pagesOf = (id: string, key: string) =>
      Effect.map(api("GET", `/sessions/${id}/json/list`, { key }), (list) => {
        assert.strictEqual(list.status, 200, list.text)
        return list.json as Array<{ id: string; title: string; url: string; webSocketDebuggerUrl: string }>
      })

    /** A raw socket on the page relay of `targetId`, open. */
    const pageSocket = (cdpUrl: string, targetId: string, key: string) =>
      Effect.acquireRelease(
        Effect.map(rawConnect(`${cdpUrl}/devtools/page/${targetId}`, bearer(key)), (connected) => {
          assert.strictEqual(connected.status, 101, connected.body)
          return connected.socket!
        }),
        (socket) => Effect.sync(() => socket.terminate())
      )

    it.effect(
      "playwright connects over CDP from the session's http URL, with headers or ?token=, and drives a page",
      () =>
        Effect.gen(function* () {
          const { service, account, session } = yield* setup()
          const page = yield* LocalPage.serve
          const browser = yield* Effect.promise(() =>
            chromium.connectOverCDP(`${service.baseUrl}/sessions/${session.id}`, {
              headers: bearer(account.key)
            })
          )
          const tab = yield* Effect.promise(() => browser.contexts()[0]!.newPage())
          yield* Effect.promise(() => tab.goto(`${page}?title=discovered-by-playwright`))
          assert.strictEqual(
            yield* Effect.promise(() => tab.locator("h1").textContent()),
            "discovered-by-playwright"
          )
          yield* Effect.promise(() => browser.close())
          // A client given only a URL: the key in it, the WebSocket URL it discovers carries it on.
          const tokened = yield* Effect.promise(() =>
            chromium.connectOverCDP(`${service.baseUrl}/sessions/${session.id}?token=${account.key}`)
          )
          assert.isAtLeast(tokened.contexts()[0]!.pages().length, 1)
          yield* Effect.promise(() => tokened.close())
          const still = yield* api("GET", `/v1/sessions/${session.id}`, { key: account.key })
          assert.strictEqual(still.json.status, "ready")
        })
    )

    it.effect(
      "/json/version answers as Chromium does, with the live browser's facts and the session's cdp_url",
      () =>
        Effect.gen(function* () {
          const { account, session } = yield* setup()
          const version = yield* api("GET", `/sessions/${session.id}/json/version`, { key: account.key })
          assert.strictEqual(version.status, 200, version.text)
          assert.match(version.headers.get("content-type") ?? "", /^application\/json/)
          assert.strictEqual(version.headers.get("cache-control"), "no-store")
          // What the browser says of itself, asked over the relay.
          const connected = yield* rawConnect(session.cdp_url, bearer(account.key))
          const { result } = yield* cdpCall(connected.socket!, 1, "Browser.getVersion")
          connected.socket!.close()
          assert.deepStrictEqual(version.json, {
            Browser: result.product,
            "Protocol-Version": result.protocolVersion,
            "User-Agent": result.userAgent,
            "V8-Version": result.jsVersion,
            "WebKit-Version": `537.36 (${result.revision})`,
            webSocketDebuggerUrl: session.cdp_url
          })
          assert.match(version.json.Browser, /^Chrome\/\d+\./)
          const slashed = yield* api("GET", `/sessions/${session.id}/json/version/`, { key: account.key })
          assert.deepStrictEqual(slashed.json, version.json)
          // A key given in the URL: the URL it answers carries a connect token of this session, never
          // the key; given as a header, no credential at all.
          const tokened = yield* api("GET", `/sessions/${session.id}/json/version?token=${account.key}`)
          assert.strictEqual(tokened.status, 200)
          assert.notInclude(tokened.text, account.key)
          const connectToken = connectTokenOf(tokened.json.webSocketDebuggerUrl, session.cdp_url)
          // Discovery with that token answers it as it is (its life is not stretched).
          const again = yield* api("GET", `/sessions/${session.id}/json/version?token=${connectToken}`)
          assert.strictEqual(again.json.webSocketDebuggerUrl, `${session.cdp_url}?token=${connectToken}`)
        })
    )

    it.effect(
      "/json/list and /json list the session's pages, each named by its page relay, never by the browser's own address",
      () =>
        Effect.gen(function* () {
          const { service, account, session } = yield* setup()
          const page = yield* LocalPage.serve
          const connected = yield* rawConnect(session.cdp_url, bearer(account.key))
          const socket = connected.socket!
          yield* cdpCall(socket, 1, "Target.createTarget", { url: `${page}?title=second` })
          const targets = (yield* cdpCall(socket, 2, "Target.getTargets")).result.targetInfos.filter(
            (target: { type: string }) => target.type === "page"
          )
          socket.close()
          assert.lengthOf(targets, 2)
          const list = yield* api("GET", `/sessions/${session.id}/json/list`, { key: account.key })
          assert.strictEqual(list.status, 200, list.text)
          assert.strictEqual(list.headers.get("cache-control"), "no-store")
          assert.sameMembers(
            list.json.map((entry: { id: string }) => entry.id),
            targets.map((target: { targetId: string }) => target.targetId)
          )
          const own = new URL(service.baseUrl)
          for (const entry of list.json) {
            assert.deepStrictEqual(Object.keys(entry).sort(), [
              "description",
              "id",
              "title",
              "type",
              "url",
              "webSocketDebuggerUrl"
            ])
            assert.strictEqual(entry.type, "page")
            assert.strictEqual(entry.webSocketDebuggerUrl, `${session.cdp_url}/devtools/page/${entry.id}`)
            const named = new URL(entry.webSocketDebuggerUrl)
            assert.strictEqual(named.host, own.host, "the service's own address, not the browser's")
          }
          for (const path of ["json", "json/", "json/list/"]) {
            const same = yield* api("GET", `/sessions/${session.id}/${path}`, { key: account.key })
            assert.strictEqual(same.status, 200, path)
            assert.sameMembers(
              same.json.map((entry: { webSocketDebuggerUrl: string }) => entry.webSocketDebuggerUrl),
              list.json.map((entry: { webSocketDebuggerUrl: string }) => entry.webSocketDebuggerUrl),
              path
            )
          }
          const tokened = yield* api("GET", `/sessions/${session.id}/json?token=${account.key}`)
          assert.notInclude(tokened.text, account.key)
          for (const entry of tokened.json)
            connectTokenOf(entry.webSocketDebuggerUrl, `${session.cdp_url}/devtools/page/${entry.id}`)
        })
    )

    it.effect(
      "chrome-remote-interface discovers through /json/version and /json/list, navigates its page to a local one and reads it back",
      () =>
        Effect.gen(function* () {
          const { service, account, session } = yield* setup()
          const page = yield* LocalPage.serve
          // It sets no headers: the key goes in the discovery paths, and the URLs it is answered carry it on.
          const options = {
            host: "127.0.0.1",
            port: Number(new URL(service.baseUrl).port),
            useHostName: true,
            alterPath: (path: string) =>
              path.startsWith("/json") ? `/sessions/${session.id}${path}?token=${account.key}` : path
          }
          const version = yield* Effect.promise(() => CDP.Version(options))
          connectTokenOf(version.webSocketDebuggerUrl!, session.cdp_url)
          const targets = yield* Effect.promise(() => CDP.List(options))
          const first = targets.find((target) => target.type === "page")!
          connectTokenOf(first.webSocketDebuggerUrl, `${session.cdp_url}/devtools/page/${first.id}`)
          const client = yield* Effect.acquireRelease(
            Effect.promise(() => CDP({ ...options, local: true })),
            (client) => Effect.promise(() => client.close())
          )
          // Its default target, the first page, through the page relay the list named (a token of its own).
          connectTokenOf(
            (client as CDP.Client & { webSocketUrl: string }).webSocketUrl,
            `${session.cdp_url}/devtools/page/${first.id}`
          )
          yield* Effect.promise(() => client.Page.enable())
          const loaded = client.Page.loadEventFired()
          const navigated = yield* Effect.promise(() =>
            client.Page.navigate({ url: `${page}?title=discovered-by-cri` })
          )
          assert.isUndefined(navigated.errorText)
          yield* Effect.promise(() => loaded)
          const read = yield* Effect.promise(() =>
            client.Runtime.evaluate({ expression: "document.querySelector('h1').textContent" })
          )
          assert.strictEqual(read.result.value, "discovered-by-cri")
          // The page it drove is the session's: the list says so.
          const after = yield* pagesOf(session.id, account.key)
          assert.strictEqual(after.find((entry) => entry.id === first.id)?.title, "discovered-by-cri")
        }).pipe(Effect.scoped)
    )

    it.effect(
      "a discovered connect token opens that session's CDP routes and nothing else: no other session, no API route, not once forged, not past its key's revoke",
      () =>
        Effect.gen(function* () {
          const { service, account, session } = yield* setup()
          const other = yield* openSession(service.baseUrl, account.key, {})
          const version = yield* api("GET", `/sessions/${session.id}/json/version?token=${account.key}`)
          const token = connectTokenOf(version.json.webSocketDebuggerUrl, session.cdp_url)
          // This session: the relay, its page relay and discovery take it, the connect acting as the key did.
          const connected = yield* rawConnect(version.json.webSocketDebuggerUrl, {})
          assert.strictEqual(connected.status, 101, connected.body)
          const { result } = yield* cdpCall(connected.socket!, 1, "Target.getTargets")
          connected.socket!.close()
          const first = result.targetInfos.find((target: { type: string }) => target.type === "page")
          const page = yield* rawConnect(
            `${session.cdp_url}/devtools/page/${first.targetId}?token=${token}`,
            {}
          )
          assert.strictEqual(page.status, 101, page.body)
          page.socket!.close()
          assert.strictEqual(
            (yield* api("GET", `/sessions/${session.id}/json/list?token=${token}`)).status,
            200
          )
          // Another session of the same account, as a Bearer header too: refused.
          const elsewhere = yield* rawConnect(`${other.cdp_url}?token=${token}`, {})
          assert.strictEqual(elsewhere.status, 401, elsewhere.body)
          assert.strictEqual((yield* rawConnect(other.cdp_url, bearer(token))).status, 401)
          assert.strictEqual(
            (yield* api("GET", `/sessions/${other.id}/json/version?token=${token}`)).status,
            401
          )
          // The API: not a credential there.
          const read = yield* api("GET", `/v1/sessions/${session.id}`, { key: token })
          assert.strictEqual(read.status, 401, read.text)
          // Its claims rewritten (another session's id) without the signature to match.
          const [payload, signature] = token.slice("rbs_cdp_".length).split(".")
          const claims = JSON.parse(Buffer.from(payload!, "base64url").toString())
          const forged = `rbs_cdp_${Buffer.from(JSON.stringify({ ...claims, sid: other.id })).toString("base64url")}.${signature}`
          assert.strictEqual((yield* rawConnect(`${other.cdp_url}?token=${forged}`, {})).status, 401)
          assert.strictEqual(claims.sid, session.id)
          // It names the key, not what the key may do: the key is read again at each use.
          assert.deepStrictEqual(claims.p, { k: account.keyId })
          assert.isAbove(claims.exp, Date.now() + 14 * 60_000)
          assert.isAtMost(claims.exp, Date.now() + 15 * 60_000)
          // The key revoked: its connect tokens end with it, at once.
          const revoked = yield* api("DELETE", `/v1/keys/${account.keyId}`, { cookie: account.cookie })
          assert.strictEqual(revoked.status, 204, revoked.text)
          const after = yield* rawConnect(version.json.webSocketDebuggerUrl, {})
          assert.strictEqual(after.status, 401, after.body)
        })
    )

    it.effect(
      "a page relay speaks as the page, holds a lease, and closes when its page goes or with the session's reason",
      () =>
        Effect.gen(function* () {
          const { account, session } = yield* setup()
          const [first] = yield* pagesOf(session.id, account.key)
          const socket = yield* pageSocket(session.cdp_url, first!.id, account.key)
          const answer = yield* cdpCall(socket, 1, "Runtime.evaluate", { expression: "6 * 7" })
          assert.deepStrictEqual(answer, {
            id: 1,
            result: { result: { type: "number", value: 42, description: "42" } }
          })
          const leases = yield* api("GET", `/v1/sessions/${session.id}`, { key: account.key })
          assert.strictEqual(leases.json.active_connection_leases, 1)

          // A second page, closed under its page client.
          const browser = yield* rawConnect(session.cdp_url, bearer(account.key))
          const created = yield* cdpCall(browser.socket!, 1, "Target.createTarget", { url: "about:blank" })
          const second = yield* pageSocket(session.cdp_url, created.result.targetId, account.key)
          const pageClosed = closeOf(second)
          yield* cdpCall(browser.socket!, 2, "Target.closeTarget", { targetId: created.result.targetId })
          assert.deepStrictEqual(yield* pageClosed, { code: 1000, reason: "the page was closed" })
          browser.socket!.close()

          const ended = closeOf(socket)
          assert.strictEqual(
            (yield* api("DELETE", `/v1/sessions/${session.id}`, { key: account.key })).status,
            204
          )
          assert.deepStrictEqual(yield* ended, { code: 1000, reason: "session ended: client_delete" })
        }).pipe(Effect.scoped)
    )

    it.effect(
      "a page relay is held to the relay's guard: no file:// navigation, none of the browser's own methods",
      () =>
        Effect.gen(function* () {
          const { account, session } = yield* setup()
          const [first] = yield* pagesOf(session.id, account.key)
          const socket = yield* pageSocket(session.cdp_url, first!.id, account.key)
          const blocked = yield* cdpCall(socket, 1, "Page.navigate", { url: "file:///etc/passwd" })
          assert.strictEqual(blocked.result.errorText, "net::ERR_BLOCKED_BY_CLIENT")
          const where = yield* cdpCall(socket, 2, "Runtime.evaluate", { expression: "location.href" })
          assert.strictEqual(where.result.result.value, "about:blank")
          for (const [id, method] of [
            [3, "Browser.getBrowserCommandLine"],
            [4, "Target.exposeDevToolsProtocol"]
          ] as const) {
            const refused = yield* cdpCall(socket, id, method, { targetId: first!.id })
            assert.match(refused.error.message, /Refused by the service/, method)
          }
        }).pipe(Effect.scoped)
    )

    it.effect(
      "refuses as the CDP connect does, in the API's shape: 401 without a key, 403 without sessions.write, 404 for another's session or an unknown page, 409 once ended",
      () =>
        Effect.gen(function* () {
          const { service, account, session } = yield* setup()
          const other = yield* signUp(service.baseUrl)
          const readOnly = yield* api("POST", "/v1/keys", {
            cookie: account.cookie,
            body: { name: "read", scopes: ["sessions.read"] }
          })
          assert.strictEqual(readOnly.status, 201, readOnly.text)
          const [first] = yield* pagesOf(session.id, account.key)
          const pageUrl = `${session.cdp_url}/devtools/page/${first!.id}`
          const paths = ["json/version", "json/list", "json"].map((path) => `/sessions/${session.id}/${path}`)
          const refusals = (key: string | undefined) =>
            Effect.gen(function* () {
              const answers = []
              for (const path of paths) {
                const answer = yield* api("GET", path, key === undefined ? {} : { key })
                answers.push([answer.status, answer.json?.error?.code])
              }
              const upgrade = yield* rawConnect(pageUrl, key === undefined ? {} : bearer(key))
              answers.push([upgrade.status, JSON.parse(upgrade.body || "{}").error?.code])
              return answers
            })
          const all = (status: number, code: string) => Array.from({ length: 4 }, () => [status, code])
          assert.deepStrictEqual(yield* refusals(undefined), all(401, "unauthorized"))
          assert.deepStrictEqual(yield* refusals("svc_live_nope"), all(401, "unauthorized"))
          assert.deepStrictEqual(yield* refusals(readOnly.json.secret), all(403, "forbidden"))
          assert.deepStrictEqual(yield* refusals(other.key), all(404, "session_not_found"))
          const unknown = yield* rawConnect(
            `${session.cdp_url}/devtools/page/0123456789ABCDEF`,
            bearer(account.key)
          )
          assert.strictEqual(unknown.status, 404)
          assert.deepStrictEqual(JSON.parse(unknown.body), {
            error: { code: "target_not_found", message: "No page of the session has this target id." }
          })
          const plain = yield* request(service.baseUrl, "GET", new URL(pageUrl).pathname, {
            key: account.key
          })
          assert.strictEqual(plain.status, 400)
          assert.strictEqual(plain.json.error.code, "invalid_request")
          yield* api("DELETE", `/v1/sessions/${session.id}`, { key: account.key })
          assert.deepStrictEqual(yield* refusals(account.key), all(409, "session_not_open"))
        })
    )

    it.effect("a sandbox session has no DevTools: 409 session_type_mismatch, as its CDP connect", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const account = yield* signUp(service.baseUrl)
        const sandbox = yield* api("POST", "/v1/sessions", {
          key: account.key,
          body: { session_type: "sandbox" }
        })
        assert.strictEqual(sandbox.status, 201, sandbox.text)
        const id = sandbox.json.id as string
        const base = `${service.wsBase}/sessions/${id}`
        for (const path of ["json/version", "json/list", "json"]) {
          const refused = yield* api("GET", `/sessions/${id}/${path}`, { key: account.key })
          assert.strictEqual(refused.status, 409, path)
          assert.strictEqual(refused.json.error.code, "session_type_mismatch", path)
          assert.match(refused.json.error.message, /sandbox session/, path)
        }
        for (const url of [base, `${base}/devtools/page/0123456789ABCDEF`]) {
          const refused = yield* rawConnect(url, bearer(account.key))
          assert.strictEqual(refused.status, 409, url)
          assert.strictEqual(JSON.parse(refused.body).error.code, "session_type_mismatch", url)
        }
        yield* api("DELETE", `/v1/sessions/${id}`, { key: account.key })
      })
    )

    it.effect(
      "a context session lists its own context's pages alone, and its page relay reaches nothing of the other contexts in its browser",
      () =>
        Effect.gen(function* () {
          const service = yield* TestService.TestService
          const account = yield* signUp(service.baseUrl)
          const started = () =>
            Effect.map(api("GET", "/metrics"), (metrics) =>
              metricValue(metrics.text, "rbs_context_browsers_started_total")
            )
          const ours = yield* openSession(service.baseUrl, account.key, { isolation: "context" })
          const before = yield* started()
          const theirs = yield* openSession(service.baseUrl, account.key, { isolation: "context" })
          assert.strictEqual(yield* started(), before, "both contexts are in one browser")
          const ourPages = yield* pagesOf(ours.id, account.key)
          const theirPages = yield* pagesOf(theirs.id, account.key)
          assert.lengthOf(ourPages, 1)
          assert.lengthOf(theirPages, 1)
          const their = theirPages[0]!.id
          assert.notStrictEqual(ourPages[0]!.id, their)

          const refused = yield* rawConnect(`${ours.cdp_url}/devtools/page/${their}`, bearer(account.key))
          assert.strictEqual(refused.status, 404)
          assert.strictEqual(JSON.parse(refused.body).error.code, "target_not_found")

          // On its own page's relay, Target commands reach its context alone.
          const socket = yield* pageSocket(ours.cdp_url, ourPages[0]!.id, account.key)
          const listed = yield* cdpCall(socket, 1, "Target.getTargets")
          const seen = listed.result.targetInfos.map((info: { targetId: string }) => info.targetId)
          assert.include(seen, ourPages[0]!.id)
          assert.notInclude(seen, their)
          const attach = yield* cdpCall(socket, 2, "Target.attachToTarget", {
            targetId: their,
            flatten: true
          })
          assert.match(attach.error.message, /No target/)
          const close = yield* cdpCall(socket, 3, "Target.closeTarget", { targetId: their })
          assert.match(close.error.message, /No target/)
          const created = yield* cdpCall(socket, 4, "Target.createTarget", { url: "about:blank" })
          const made = created.result.targetId as string
          assert.include(
            (yield* pagesOf(ours.id, account.key)).map((entry) => entry.id),
            made
          )
          const theirsAfter = (yield* pagesOf(theirs.id, account.key)).map((entry) => entry.id)
          assert.deepStrictEqual(theirsAfter, [their], "their page is still there, and only theirs")

          // playwright from its http URL works in its context as ever (its page sessions ask for their windows).
          const page = yield* LocalPage.serve
          const browser = yield* Effect.promise(() =>
            chromium.connectOverCDP(`${service.baseUrl}/sessions/${ours.id}`, {
              headers: bearer(account.key)
            })
          )
          const [context] = browser.contexts()
          assert.lengthOf(context!.pages(), 2)
          const tab = yield* Effect.promise(() => context!.newPage())
          yield* Effect.promise(() => tab.goto(`${page}?title=in-our-context`))
          assert.strictEqual(yield* Effect.promise(() => tab.title()), "in-our-context")
          yield* Effect.promise(() => browser.close())
          assert.deepStrictEqual(
            (yield* pagesOf(theirs.id, account.key)).map((entry) => entry.id),
            [their]
          )
        }).pipe(Effect.scoped)
    )
  }
)
