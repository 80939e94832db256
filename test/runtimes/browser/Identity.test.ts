import { assert, describe, it as plain, layer } from "@effect/vitest"
import { Effect } from "effect"
import { chromium } from "playwright-core"
import puppeteer from "puppeteer-core"
import { clientHintsOf, platformOf, userAgentOverride } from "../../../src/runtimes/browser/Identity.ts"
import { isReady, metricValue, request, signUp, waitForSession } from "../../support/Client.ts"
import { until } from "../../support/Poll.ts"
import * as TestService from "../../support/TestService.ts"
import * as WorkerSite from "../../support/WorkerSite.ts"

// A session's identity at create (user agent, locale, time zone, viewport), read where a site reads
// it: in the page, a page opened later, a worker, a service worker and each request's headers.

const WINDOWS_CHROME =
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
const FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
const ANDROID_CHROME =
  "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36"

const PAGE = `<!doctype html><html><head><meta name="viewport" content="width=device-width"><title>identity</title></head><body><h1>identity</h1></body></html>`
const READ = `[navigator.userAgent, [...navigator.languages], Intl.DateTimeFormat().resolvedOptions().timeZone]`
const WORKER = `postMessage(${READ})`
const SERVICE_WORKER = `self.addEventListener("message", (event) => event.source.postMessage(${READ}))`

const site = WorkerSite.serve(PAGE, WORKER, SERVICE_WORKER)

/** What the page at hand reads of its browser: run in it (no closure: it is sent as source). */
const readIdentity = async () => {
  const page = globalThis as any
  const navigator = page.navigator
  const worker = await new Promise<Array<unknown>>((resolve) => {
    const each = new page.Worker("/worker.js")
    each.onmessage = (event: any) => resolve(event.data)
  })
  const registration = await navigator.serviceWorker.register("/sw.js")
  await navigator.serviceWorker.ready
  const serviceWorker = await new Promise<Array<unknown>>((resolve) => {
    navigator.serviceWorker.onmessage = (event: any) => resolve(event.data)
    registration.active.postMessage("read")
  })
  const data = navigator.userAgentData
  const high =
    data === undefined ? undefined : await data.getHighEntropyValues(["platformVersion", "fullVersionList"])
  return {
    userAgent: navigator.userAgent as string,
    platform: navigator.platform as string,
    brands: (data?.brands ?? []).map((brand: any) => `${brand.brand}/${brand.version}`) as Array<string>,
    hintsPlatform: data?.platform as string | undefined,
    hintsMobile: data?.mobile as boolean | undefined,
    platformVersion: high?.platformVersion as string | undefined,
    languages: [...navigator.languages] as Array<string>,
    language: navigator.language as string,
    intlLocale: Intl.DateTimeFormat().resolvedOptions().locale,
    timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    // Tokyo has had no summer time since 1951: +9 hours all year.
    offset: new Date(Date.UTC(2026, 0, 1)).getTimezoneOffset(),
    size: [page.innerWidth, page.innerHeight, page.devicePixelRatio] as Array<number>,
    screen: [page.screen.width, page.screen.height] as Array<number>,
    coarse: page.matchMedia("(pointer: coarse)").matches as boolean,
    touch: navigator.maxTouchPoints as number,
    worker,
    serviceWorker
  }
}

type Identity = Awaited<ReturnType<typeof readIdentity>>

describe("the identity a user agent implies", () => {
  plain("a Chrome on Windows gives its brand, version and platform", () => {
    const override = userAgentOverride(WINDOWS_CHROME, "de-DE")
    assert.strictEqual(override.platform, "Win32")
    assert.strictEqual(override.acceptLanguage, "de-DE,de")
    assert.deepStrictEqual(
      override.userAgentMetadata?.brands.map((brand) => brand.brand),
      ["Not:A-Brand", "Chromium", "Google Chrome"]
    )
    assert.strictEqual(override.userAgentMetadata?.platform, "Windows")
    assert.strictEqual(override.userAgentMetadata?.platformVersion, "10.0.0")
    assert.strictEqual(override.userAgentMetadata?.fullVersion, "120.0.0.0")
  })

  plain("an Edge gives Edge's brand, an Android Chrome a phone's platform and model, Firefox none", () => {
    const edge = clientHintsOf(`${WINDOWS_CHROME} Edg/120.0.2210.91`)
    assert.deepStrictEqual(edge?.brands[2], { brand: "Microsoft Edge", version: "120" })
    assert.strictEqual(edge?.fullVersion, "120.0.2210.91")
    const android = clientHintsOf(ANDROID_CHROME)
    assert.deepStrictEqual([android?.platform, android?.mobile, android?.model], ["Android", true, "Pixel 8"])
    assert.strictEqual(platformOf(ANDROID_CHROME).navigator, "Linux armv81")
    assert.isUndefined(clientHintsOf(FIREFOX))
    assert.strictEqual(platformOf(FIREFOX).navigator, "Linux x86_64")
    assert.strictEqual(
      platformOf("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36").navigator,
      "MacIntel"
    )
  })
})

layer(TestService.layer({ browserPoolSize: 1 }), { excludeTestServices: true })(
  "identity at create",
  (it) => {
    const create = (body: object) =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const created = yield* request(service.baseUrl, "POST", "/v1/sessions", { key, body })
        return { key, created, service }
      })
    const session = (body: object) =>
      Effect.gen(function* () {
        const { key, created, service } = yield* create(body)
        assert.strictEqual(created.status, 201, created.text)
        const ready = yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
        return { key, id: created.json.id as string, cdpUrl: created.json.cdp_url as string, service, ready }
      })

    it.effect(
      "user agent, locale, time zone and viewport hold in the first page, a later page, their workers and every request, with puppeteer",
      () =>
        Effect.gen(function* () {
          const { key, id, cdpUrl, service, ready } = yield* session({
            user_agent: WINDOWS_CHROME,
            locale: "de-de",
            timezone: "asia/tokyo",
            viewport: { width: 1024, height: 700, device_scale_factor: 2 }
          })
          // As given, in canonical forms.
          assert.strictEqual(ready.user_agent, WINDOWS_CHROME)
          assert.strictEqual(ready.locale, "de-DE")
          assert.strictEqual(ready.timezone, "Asia/Tokyo")
          assert.deepStrictEqual(ready.viewport, { width: 1024, height: 700, device_scale_factor: 2 })
          assert.match(ready.device, /1024x700/)
          const pages = yield* site
          const browser = yield* Effect.promise(() =>
            puppeteer.connect({
              browserWSEndpoint: cdpUrl,
              headers: { Authorization: `Bearer ${key}` },
              defaultViewport: null
            })
          )
          const check = (read: Identity, where: string) => {
            assert.strictEqual(read.userAgent, WINDOWS_CHROME, `${where}: navigator.userAgent`)
            assert.strictEqual(read.platform, "Win32", `${where}: navigator.platform`)
            assert.deepStrictEqual(
              read.brands,
              ["Not:A-Brand/8", "Chromium/120", "Google Chrome/120"],
              `${where}: client hints`
            )
            assert.strictEqual(read.hintsPlatform, "Windows", where)
            assert.strictEqual(read.platformVersion, "10.0.0", where)
            assert.deepStrictEqual(read.languages, ["de-DE", "de"], `${where}: navigator.languages`)
            assert.strictEqual(read.language, "de-DE", where)
            assert.strictEqual(read.intlLocale, "de-DE", `${where}: Intl`)
            assert.strictEqual(read.timeZone, "Asia/Tokyo", `${where}: the JS time zone`)
            assert.strictEqual(read.offset, -540, `${where}: Date`)
            assert.deepStrictEqual(read.size, [1024, 700, 2], `${where}: the viewport`)
            assert.isAtLeast(read.screen[0]!, 1024, `${where}: the screen holds the window`)
            assert.deepStrictEqual(
              read.worker,
              [WINDOWS_CHROME, ["de-DE", "de"], "Asia/Tokyo"],
              `${where}: a worker`
            )
            assert.deepStrictEqual(
              read.serviceWorker,
              [WINDOWS_CHROME, ["de-DE", "de"], "Asia/Tokyo"],
              `${where}: a service worker`
            )
          }
          const first = (yield* Effect.promise(() => browser.pages()))[0]!
          yield* Effect.promise(() => first.goto(`${pages.url}/`))
          check(yield* Effect.promise(() => first.evaluate(readIdentity)), "the first page")
          const later = yield* Effect.promise(() => browser.newPage())
          yield* Effect.promise(() => later.goto(`${pages.url}/later`))
          check(yield* Effect.promise(() => later.evaluate(readIdentity)), "a later page")
          assert.isAbove(pages.seen.length, 4)
          for (const seen of pages.seen) {
            assert.strictEqual(seen.userAgent, WINDOWS_CHROME, "a request's User-Agent")
            assert.match(seen.acceptLanguage, /^de-DE,de(;q=0\.9)?$/, "a request's Accept-Language")
          }
          // The pages' own requests carry the hints the user agent implies.
          const documents = pages.seen.filter(
            (seen) => seen.hints !== undefined && /Google Chrome/.test(seen.hints)
          )
          assert.isAbove(documents.length, 1)
          for (const seen of documents) assert.include(seen.hints!, `"Google Chrome";v="120"`)
          yield* Effect.promise(() => browser.disconnect())
          yield* request(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })
        })
    )

    it.effect(
      "a user agent of another browser gives no client hints, and a phone's viewport is a phone's, with playwright",
      () =>
        Effect.gen(function* () {
          const { key, id, cdpUrl, service } = yield* session({
            user_agent: FIREFOX,
            viewport: { width: 390, height: 844, device_scale_factor: 3, mobile: true }
          })
          const pages = yield* site
          const browser = yield* Effect.promise(() =>
            chromium.connectOverCDP(cdpUrl, { headers: { Authorization: `Bearer ${key}` } })
          )
          const page = yield* Effect.promise(() => browser.contexts()[0]!.newPage())
          yield* Effect.promise(() => page.goto(`${pages.url}/`))
          const read = yield* Effect.promise(() => page.evaluate(readIdentity))
          assert.strictEqual(read.userAgent, FIREFOX)
          assert.strictEqual(read.platform, "Linux x86_64")
          assert.deepStrictEqual(read.brands, [], "no client hints")
          assert.deepStrictEqual(read.size, [390, 844, 3], "a phone's viewport")
          assert.deepStrictEqual(read.screen, [390, 844], "a phone's screen")
          assert.isTrue(read.coarse, "a touch screen")
          assert.isAbove(read.touch, 0)
          for (const seen of pages.seen.filter((each) => each.userAgent === FIREFOX))
            assert.isUndefined(seen.hints, "no Sec-CH-UA")
          yield* Effect.promise(() => browser.close())
          yield* request(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })
        })
    )

    it.effect("a viewport alone is served by a warm browser, its later windows at that size too", () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const metrics = () =>
          request(service.baseUrl, "GET", "/metrics").pipe(
            Effect.map((answer) =>
              metricValue(answer.text, "rbs_browser_pool_acquires_total", 'result="warm"')
            )
          )
        // A browser waits in the pool before the create, so a warm acquire is possible.
        yield* until(
          request(service.baseUrl, "GET", "/readyz"),
          (answer) => answer.json?.browser_pool?.idle >= 1,
          30_000
        )
        const before = yield* metrics()
        const { key, id, cdpUrl } = yield* session({ viewport: { width: 800, height: 600 } })
        assert.strictEqual(yield* metrics(), before + 1, "served warm")
        const pages = yield* site
        const browser = yield* Effect.promise(() =>
          puppeteer.connect({
            browserWSEndpoint: cdpUrl,
            headers: { Authorization: `Bearer ${key}` },
            defaultViewport: null
          })
        )
        const first = (yield* Effect.promise(() => browser.pages()))[0]!
        yield* Effect.promise(() => first.goto(`${pages.url}/`))
        const size = () => [(globalThis as any).innerWidth, (globalThis as any).innerHeight]
        assert.deepStrictEqual(yield* Effect.promise(() => first.evaluate(size)), [800, 600])
        const later = yield* Effect.promise(() => browser.newPage())
        yield* Effect.promise(() => later.goto(`${pages.url}/later`))
        assert.deepStrictEqual(yield* Effect.promise(() => later.evaluate(size)), [800, 600])
        yield* Effect.promise(() => browser.disconnect())
        yield* request(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })
      })
    )

    it.effect(
      "a field a session's kind cannot take, or a value that is none, is 400 invalid_field naming it",
      () =>
        Effect.gen(function* () {
          const cases: ReadonlyArray<readonly [object, string]> = [
            [{ isolation: "context", user_agent: WINDOWS_CHROME }, "user_agent"],
            [{ isolation: "context", locale: "de-DE" }, "locale"],
            [{ isolation: "context", viewport: { width: 800, height: 600 } }, "viewport"],
            [{ session_type: "sandbox", timezone: "Europe/Berlin" }, "timezone"],
            [{ session_type: "sandbox", viewport: { width: 800, height: 600 } }, "viewport"],
            [{ locale: "not a locale" }, "locale"],
            [{ locale: "de-DE-x-".repeat(10) }, "locale"],
            [{ timezone: "Mars/Olympus_Mons" }, "timezone"],
            [{ user_agent: " leading space" }, "user_agent"],
            [{ user_agent: "tab\there" }, "user_agent"],
            [{ user_agent: "x".repeat(513) }, "user_agent"],
            [{ viewport: { width: 100, height: 600 } }, "viewport"],
            [{ viewport: { width: 800, height: 600, device_scale_factor: 9 } }, "viewport"],
            [{ viewport: { width: 800, height: 600, depth: 24 } }, "viewport"]
          ]
          for (const [body, field] of cases) {
            const { created } = yield* create(body)
            assert.strictEqual(created.status, 400, `${JSON.stringify(body)}: ${created.text}`)
            assert.strictEqual(created.json.error.code, "invalid_field", JSON.stringify(body))
            assert.include(created.json.error.message, field, JSON.stringify(body))
          }
        })
    )
  }
)
