import { assert, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ProxyChain from "proxy-chain"
import puppeteer, { type Browser } from "puppeteer-core"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import * as BrowserDownloads from "../../../src/runtimes/browser/BrowserDownloads.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"
import * as TrafficServer from "../../support/TrafficServer.ts"

/** A second, real proxy that requires credentials: the upstream of the `eu` region. */
class Upstream extends Context.Service<Upstream, { readonly port: number; readonly seen: Array<string> }>()(
  "test/Upstream"
) {
  static readonly layer = Layer.effect(
    Upstream,
    Effect.acquireRelease(
      Effect.promise(async () => {
        const seen: Array<string> = []
        const server = new ProxyChain.Server({
          port: 0,
          host: "127.0.0.3",
          prepareRequestFunction: ({ username, password, hostname, port }) => {
            seen.push(`${username}@${hostname}:${port}`)
            return { requestAuthentication: username !== "rbs" || password !== "s3cret" }
          }
        })
        await server.listen()
        return { server, seen }
      }),
      ({ server }) => Effect.promise(() => server.close(true))
    ).pipe(Effect.map(({ server, seen }) => ({ port: server.port, seen })))
  )
}

class Traffic extends Context.Service<Traffic, TrafficServer.TrafficServer>()("test/Traffic") {
  static readonly layer = Layer.effect(Traffic, TrafficServer.serve("127.0.0.2"))
}

// The service listens on 127.0.0.2, the only address the egress allow-list opens: its own
// port there must still be refused, and `localhost` (127.0.0.1) stays refused.
const ServiceLive = Layer.unwrap(
  Effect.gen(function* () {
    const upstream = yield* Upstream
    return TestService.layer({
      host: "127.0.0.2",
      browserPoolSize: 1,
      egressAllowCidrs: "127.0.0.2/32",
      egressRegions: [
        "local=direct",
        `eu=http://rbs:s3cret@127.0.0.3:${upstream.port}#198.51.100.7`,
        `bad=http://rbs:wrong@127.0.0.3:${upstream.port}`
      ].join(",")
    })
  })
).pipe(Layer.provideMerge(Layer.mergeAll(Upstream.layer, Traffic.layer)))

const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
  Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

/** A ready session and puppeteer connected to it through the relay; the browser is disconnected after. */
const connectedSession = (body: object = {}) =>
  Effect.gen(function* () {
    const service = yield* TestService.TestService
    const account = yield* signUp(service.baseUrl)
    const created = yield* api("POST", "/v1/sessions", { key: account.key, body })
    assert.strictEqual(created.status, 201, created.text)
    const session = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
    const browser = yield* Effect.acquireRelease(
      Effect.promise(() =>
        puppeteer.connect({
          browserWSEndpoint: session.cdp_url,
          headers: { authorization: `Bearer ${account.key}` }
        })
      ),
      (browser: Browser) => Effect.promise(() => browser.disconnect())
    )
    const [tab] = yield* Effect.promise(() => browser.pages())
    return { service, account, session, browser, tab: tab! }
  })

/** Waits until the session's live figures satisfy `predicate` (flushed at least every second). */
const waitForBytes = (key: string, id: string, predicate: (session: any) => boolean) =>
  Effect.flatMap(TestService.TestService, (service) =>
    waitForSession(service.baseUrl, key, id, predicate, 10_000)
  )

/** Within 1% of the wire, plus a small allowance for headers. */
const close = (counted: number, wire: number) => Math.abs(counted - wire) <= wire * 0.01 + 2048

layer(ServiceLive, { excludeTestServices: true, timeout: 120_000 })("egress proxy", (it) => {
  it.effect("counts HTTP, HTTPS and WebSocket traffic on the wire, live and at close", () =>
    Effect.gen(function* () {
      const traffic = yield* Traffic
      const { account, session, browser, tab } = yield* connectedSession()
      const before = traffic.counts()

      // HTTP: a page, a 2 MB download and a 1 MB upload.
      const page = yield* Effect.promise(() => tab.goto(`${traffic.http}/page?title=metered`))
      assert.strictEqual(page?.status(), 200)
      const downloaded = yield* Effect.promise(() =>
        tab.evaluate(async () => (await (await fetch("/bytes?n=2000000")).arrayBuffer()).byteLength)
      )
      assert.strictEqual(downloaded, 2_000_000)
      const uploaded = yield* Effect.promise(() =>
        tab.evaluate(async () => {
          const response = await fetch("/upload", { method: "POST", body: new Uint8Array(1_000_000) })
          return ((await response.json()) as { received: number }).received
        })
      )
      assert.strictEqual(uploaded, 1_000_000)

      // A WebSocket (tunnelled with CONNECT): 300 KB each way.
      const echoed = yield* Effect.promise(() =>
        tab.evaluate(
          (url) =>
            new Promise<number>((resolve, reject) => {
              const socket = new WebSocket(url)
              socket.binaryType = "arraybuffer"
              socket.onopen = () => socket.send(new Uint8Array(300_000))
              socket.onmessage = (event) => {
                resolve((event.data as ArrayBuffer).byteLength)
                socket.close()
              }
              socket.onerror = () => reject(new Error("websocket failed"))
            }),
          traffic.ws
        )
      )
      assert.strictEqual(echoed, 300_000)

      // HTTPS through a CONNECT tunnel, the test trusting its self-signed certificate.
      const cdp = yield* Effect.promise(() => browser.target().createCDPSession())
      yield* Effect.promise(() => cdp.send("Security.setIgnoreCertificateErrors", { ignore: true }))
      const secure = yield* Effect.promise(() => tab.goto(`${traffic.https}/page?title=secure`))
      assert.strictEqual(secure?.status(), 200)
      const secureBytes = yield* Effect.promise(() =>
        tab.evaluate(async () => (await (await fetch("/bytes?n=1500000")).arrayBuffer()).byteLength)
      )
      assert.strictEqual(secureBytes, 1_500_000)

      // Live: the row shows the figures while the session runs.
      const live = yield* waitForBytes(
        account.key,
        session.id,
        (s) => s.bytes_down >= 3_800_000 && s.bytes_up >= 1_300_000
      )
      assert.strictEqual(live.status, "ready")
      assert.strictEqual(live.proxy_region, "local")
      assert.isTrue(traffic.remoteAddresses().has(live.proxy_ip), `proxy_ip ${live.proxy_ip}`)

      yield* Effect.promise(() => cdp.detach())
      yield* Effect.promise(() => browser.disconnect())
      assert.strictEqual(
        (yield* api("DELETE", `/v1/sessions/${session.id}`, { key: account.key })).status,
        204
      )
      const ended = (yield* api("GET", `/v1/sessions/${session.id}`, { key: account.key })).json
      const after = traffic.counts()
      const wire = { up: after.bytesIn - before.bytesIn, down: after.bytesOut - before.bytesOut }
      assert.isTrue(close(ended.bytes_up, wire.up), `bytes_up ${ended.bytes_up} vs wire ${wire.up}`)
      assert.isTrue(close(ended.bytes_down, wire.down), `bytes_down ${ended.bytes_down} vs wire ${wire.down}`)

      const metrics = (yield* api("GET", "/metrics")).text
      assert.match(metrics, /rbs_egress_bytes_total\{region="local",direction="down"\} \d{7,}/)
      assert.match(metrics, /rbs_egress_bytes_total\{region="local",direction="up"\} \d{7,}/)

      // Billed at close from the same figures: 200 bytes per micro-dollar, from the 5 USD signup credit.
      const charge = Math.floor((ended.bytes_up + ended.bytes_down) / 200)
      const summary = (yield* api("GET", "/v1/billing/summary", { key: account.key })).json
      const debit = summary.recent_entries.find((entry: any) => entry.session_id === session.id)
      assert.deepStrictEqual([debit.kind, debit.amount_micro_usd], ["session_egress", -charge])
      assert.strictEqual(summary.balance_micro_usd, 5_000_000 - charge)
      assert.match(metrics, /rbs_ledger_debits_micro_usd_total\{kind="session_egress"\} [1-9]/)
    })
  )

  it.effect("refuses private, link-local, loopback and the service's own destinations, unbilled", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const traffic = yield* Traffic
      const { account, session, tab } = yield* connectedSession()
      const servicePort = new URL(service.baseUrl).port
      const refused = [
        ["http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"],
        ["http://10.1.2.3/", "10.1.2.3 is a private address"],
        [`http://127.0.0.2:${servicePort}/healthz`, "one of the service's own ports"],
        [`http://localhost:${traffic.port}/page`, "localhost is this machine"],
        ["http://[::ffff:169.254.169.254]/", "is a link-local address"],
        ["http://100.64.0.1/", "carrier-grade NAT"]
      ] as const
      for (const [url, reason] of refused) {
        const response = yield* Effect.promise(() => tab.goto(url))
        assert.strictEqual(response?.status(), 403, url)
        const text = yield* Effect.promise(() =>
          tab.evaluate(() => (globalThis as any).document.body.innerText as string)
        )
        assert.include(text, "Refused by the egress policy", url)
        assert.include(text, reason, url)
      }
      // HTTPS to a refused address: the CONNECT itself is refused.
      const tunnel = yield* Effect.promise(() =>
        tab.goto("https://169.254.169.254/").then(
          () => "loaded",
          (error: Error) => error.message
        )
      )
      assert.include(tunnel, "ERR_TUNNEL_CONNECTION_FAILED")

      // No DevTools port of any browser, even on an allowed address.
      const browsers = yield* Effect.promise(() => tab.goto(`http://127.0.0.2:${servicePort}/json/version`))
      assert.strictEqual(browsers?.status(), 403)

      // A name with no address (`.invalid` never resolves) is refused by the proxy and counted too.
      const nowhere = yield* Effect.promise(() => tab.goto("http://nowhere.invalid/"))
      assert.strictEqual(nowhere?.status(), 502)

      const metrics = (yield* api("GET", "/metrics")).text
      for (const reason of ["link_local", "private", "service_port", "loopback", "cgnat", "unresolved"]) {
        assert.match(metrics, new RegExp(`rbs_egress_refused_total\\{reason="${reason}"\\} [1-9]`), reason)
      }
      yield* api("DELETE", `/v1/sessions/${session.id}`, { key: account.key })
      const ended = (yield* api("GET", `/v1/sessions/${session.id}`, { key: account.key })).json
      assert.deepStrictEqual([ended.bytes_up, ended.bytes_down], [0, 0], "refused requests are not metered")
    })
  )

  it.effect("blocks file:// and chrome:// navigations in the browser", () =>
    Effect.gen(function* () {
      const { browser, tab } = yield* connectedSession()
      for (const url of ["file:///etc/hostname", "chrome://version", "chrome://settings"]) {
        const outcome = yield* Effect.promise(() =>
          tab.goto(url).then(
            () => tab.url(),
            (error: Error) => error.message
          )
        )
        assert.match(outcome, /ERR_BLOCKED_BY_CLIENT|blocked/i, `${url}: ${outcome}`)
        const shown = tab.url()
        assert.isFalse(shown.startsWith(url.slice(0, 7)), `${url} is not showing (${shown})`)
      }
      const text = yield* Effect.promise(() =>
        tab.evaluate(() => ((globalThis as any).document.body?.innerText ?? "") as string)
      )
      assert.notInclude(text, "Chromium", "no chrome:// page is showing")
      // Nor as a new tab, nor through the legacy non-flattened message form.
      const cdp = yield* Effect.promise(() => browser.target().createCDPSession())
      const created = yield* Effect.promise(() =>
        cdp.send("Target.createTarget", { url: "chrome://version" }).then(
          () => "created",
          (error: Error) => error.message
        )
      )
      assert.include(created, "ERR_BLOCKED_BY_CLIENT")
      yield* Effect.promise(() => cdp.detach())

      // A page cannot get there by itself: script, window, frame or redirect.
      const traffic = yield* Traffic
      const attempts = [
        "location.href = 'file:///etc/hostname'",
        "location.href = 'chrome://version'",
        "window.open('file:///etc/hostname')",
        "document.body.innerHTML = '<iframe src=\"file:///etc/hostname\"></iframe>'",
        `location.href = '${traffic.http}/redirect?to=file:///etc/hostname'`
      ]
      for (const attempt of attempts) {
        yield* Effect.promise(() => tab.goto(`${traffic.http}/page?title=start`))
        yield* Effect.promise(() => tab.evaluate(attempt).catch(() => undefined))
        // Waiting for a navigation that must not happen: there is no event to wait for, so give
        // it the time a local navigation takes many times over.
        yield* Effect.sleep("500 millis")
        const pages = yield* Effect.promise(() => browser.pages())
        for (const page of pages) {
          const shown = [page.url(), ...page.frames().map((frame) => frame.url())]
          assert.isFalse(
            shown.some((url) => url.startsWith("file:") || url.startsWith("chrome:")),
            `${attempt}: ${shown.join(", ")}`
          )
          if (page !== tab) yield* Effect.promise(() => page.close())
        }
      }
    })
  )

  it.effect("downloads land in the session's own directory, whatever path the client names", () =>
    Effect.gen(function* () {
      const traffic = yield* Traffic
      const { browser, session, tab } = yield* connectedSession()
      const elsewhere = Path.join(Os.tmpdir(), `rbs-not-here-${Date.now()}`)
      const cdp = yield* Effect.promise(() => browser.target().createCDPSession())
      yield* Effect.promise(() =>
        cdp.send("Browser.setDownloadBehavior", {
          behavior: "allow",
          downloadPath: elsewhere,
          eventsEnabled: true
        })
      )
      const done = new Promise<string>((resolve) =>
        cdp.on(
          "Browser.downloadProgress",
          (event: any) => event.state === "completed" && resolve(event.guid as string)
        )
      )
      yield* Effect.promise(() => tab.goto(`${traffic.http}/bytes?n=4096`).catch(() => undefined))
      yield* Effect.promise(() => done)
      // The session's own directory, kept on its node (`DATA_DIR/downloads/<id>`).
      const downloads = BrowserDownloads.dirOf((yield* ServiceConfig).dataDir, session.id)
      const files = yield* Effect.promise(() => Fs.readdir(downloads))
      // "allow" keeps the suggested name (the last path segment).
      assert.include(files, "bytes", "the file is in the session's own directory")
      const escaped = yield* Effect.promise(() =>
        Fs.stat(elsewhere).then(
          () => true,
          () => false
        )
      )
      assert.isFalse(escaped, "nothing was written where the client asked")
      yield* Effect.promise(() => cdp.detach())
    })
  )

  it.effect("a chained region sends traffic through its upstream proxy, with credentials", () =>
    Effect.gen(function* () {
      const traffic = yield* Traffic
      const upstream = yield* Upstream
      const seenBefore = upstream.seen.length
      const { account, session, tab } = yield* connectedSession({ region: "eu" })
      const page = yield* Effect.promise(() => tab.goto(`${traffic.http}/page?title=via-eu`))
      assert.strictEqual(page?.status(), 200)
      assert.strictEqual(yield* Effect.promise(() => tab.title()), "via-eu")
      yield* Effect.promise(() =>
        tab.evaluate(async () => (await (await fetch("/bytes?n=500000")).arrayBuffer()).byteLength)
      )
      const through = upstream.seen.slice(seenBefore)
      assert.isTrue(
        through.some((entry) => entry.startsWith("rbs@127.0.0.2")),
        JSON.stringify(through)
      )
      const live = yield* waitForBytes(account.key, session.id, (s) => s.bytes_down >= 500_000)
      assert.strictEqual(live.proxy_region, "eu")
      assert.strictEqual(live.proxy_ip, "198.51.100.7")

      // The guard still applies before the upstream: no metadata service of the upstream's network either.
      const refused = yield* Effect.promise(() => tab.goto("http://169.254.169.254/"))
      assert.strictEqual(refused?.status(), 403)
    })
  )

  it.effect("an upstream that refuses the credentials fails the request, and a bad region is 400", () =>
    Effect.gen(function* () {
      const traffic = yield* Traffic
      const { tab } = yield* connectedSession({ region: "bad" })
      // proxy-chain answers 597 for upstream credentials it could not use.
      const response = yield* Effect.promise(() => tab.goto(`${traffic.http}/page`))
      assert.isAtLeast(response?.status() ?? 0, 500)
      const text = yield* Effect.promise(() =>
        tab.evaluate(() => (globalThis as any).document.body.innerText as string)
      )
      assert.include(text, "upstream proxy credentials")
      const { key } = yield* Effect.flatMap(TestService.TestService, (s) => signUp(s.baseUrl))
      for (const region of ["mars", "EU", 5]) {
        const created = yield* api("POST", "/v1/sessions", { key, body: { region } })
        assert.strictEqual(created.status, 400, String(region))
        assert.deepStrictEqual(created.json, {
          error: { code: "invalid_field", message: "Invalid value for field: region." }
        })
      }
    })
  )
})
