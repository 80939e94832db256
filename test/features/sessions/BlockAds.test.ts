import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import puppeteer from "puppeteer-core"
import { isReady, metricValue, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"
import * as TrafficServer from "../../support/TrafficServer.ts"

// The test's own list, in Adblock Plus syntax: `localhost` stands for an ad host (it reaches the
// test's server at 127.0.0.1, which the page at 127.0.0.1 loads "ads" from).
const LIST = Path.join(TestService.TEST_ROOT, "block-ads-list.txt")
Fs.mkdirSync(TestService.TEST_ROOT, { recursive: true })
Fs.writeFileSync(LIST, "[Adblock Plus 2.0]\n! the test's ad host\n||localhost^\n")

const AD_BYTES = 400_000

layer(TestService.layer({ browserPoolSize: 1, blockAdsLists: LIST }), { excludeTestServices: true })(
  "block_ads",
  (it) => {
    /** A session made with `body`, a page that loads an "ad" of `AD_BYTES`, and the session once ended. */
    const visit = (body: object) =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const site = yield* TrafficServer.serve("127.0.0.1")
        const created = yield* request(service.baseUrl, "POST", "/v1/sessions", { key, body })
        assert.strictEqual(created.status, 201, created.text)
        const ready = yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
        const browser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: created.json.cdp_url,
            headers: { Authorization: `Bearer ${key}` }
          })
        )
        const page = (yield* Effect.promise(() => browser.pages()))[0]!
        yield* Effect.promise(() => page.goto(`${site.http}/page`))
        const ad = yield* Effect.promise(() =>
          page.evaluate(
            (url) =>
              fetch(url).then(
                async (response) => `${response.status} ${(await response.arrayBuffer()).byteLength}`,
                (error: Error) => error.message
              ),
            `http://localhost:${site.port}/bytes?n=${AD_BYTES}`
          )
        )
        yield* Effect.promise(() => browser.disconnect())
        assert.strictEqual(
          (yield* request(service.baseUrl, "DELETE", `/v1/sessions/${ready.id}`, { key })).status,
          204
        )
        const ended = yield* waitForSession(service.baseUrl, key, ready.id, (s) => s.status === "closed")
        return { ready, ad, ended, site }
      })

    it.effect(
      "refuses the list's hosts before anything leaves, counts them, and bills only the page; without it the ad is loaded and billed",
      () =>
        Effect.gen(function* () {
          const service = yield* TestService.TestService
          const before = metricValue(
            (yield* request(service.baseUrl, "GET", "/metrics")).text,
            "rbs_egress_refused_total",
            'reason="ad_host"'
          )
          const blocked = yield* visit({ block_ads: true })
          assert.isTrue(blocked.ready.block_ads)
          assert.strictEqual(blocked.ad, "Failed to fetch", "the page sees the ad's request fail")
          assert.isFalse(
            blocked.site.requests().some((each) => each.startsWith("GET /bytes")),
            "the ad host never heard of it"
          )
          const after = metricValue(
            (yield* request(service.baseUrl, "GET", "/metrics")).text,
            "rbs_egress_refused_total",
            'reason="ad_host"'
          )
          assert.isAbove(after, before, "counted as refused, by reason")

          const open = yield* visit({})
          assert.isFalse(open.ready.block_ads)
          assert.strictEqual(open.ad, `200 ${AD_BYTES}`)
          assert.isBelow(blocked.ended.bytes_down, 50_000, "the blocked session paid for its page alone")
          assert.isAbove(open.ended.bytes_down, AD_BYTES, "the other paid for the ad too")
        })
    )
  }
)

layer(TestService.layer({ browserPoolSize: 1, blockAdsLists: "/nonexistent/list.txt" }), {
  excludeTestServices: true
})("block_ads without a list", (it) => {
  it.effect("a node with no list refuses block_ads with invalid_field, and creates nothing", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const { key } = yield* signUp(service.baseUrl)
      const refused = yield* request(service.baseUrl, "POST", "/v1/sessions", {
        key,
        body: { block_ads: true }
      })
      assert.deepStrictEqual(refused.json, {
        error: { code: "invalid_field", message: "Invalid value for field: block_ads." }
      })
      assert.deepStrictEqual((yield* request(service.baseUrl, "GET", "/v1/sessions", { key })).json.data, [])
    })
  )
})
