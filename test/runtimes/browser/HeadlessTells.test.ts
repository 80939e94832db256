import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { chromium } from "playwright-core"
import puppeteer from "puppeteer-core"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"
import * as WorkerSite from "../../support/WorkerSite.ts"

// What a page reads of its browser, the reads bot checks make first: none may say "headless".

const PAGE = `<!doctype html><html><head><title>tells</title></head><body><h1>tells</h1></body></html>`
const WORKER = `postMessage([navigator.userAgent, navigator.webdriver === true, navigator.languages])`
const SERVICE_WORKER = `self.addEventListener("message", (event) => event.source.postMessage([navigator.userAgent]))`

const site = WorkerSite.serve(PAGE, WORKER, SERVICE_WORKER)

/** What the page at hand reads: run in it (a function of no closure: it is sent as source). */
const readTells = async () => {
  // The page's own globals (the test's tsconfig has no DOM types).
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
    registration.active.postMessage("tell")
  })
  return {
    userAgent: navigator.userAgent as string,
    webdriver: navigator.webdriver as boolean,
    languages: [...navigator.languages] as Array<string>,
    plugins: navigator.plugins.length as number,
    chrome: typeof page.chrome,
    brands: navigator.userAgentData.brands.map((brand: { brand: string }) => brand.brand) as Array<string>,
    notification: page.Notification.permission as string,
    permission: (await navigator.permissions.query({ name: "notifications" })).state as string,
    screen: [page.screen.width, page.screen.height] as Array<number>,
    window: [page.outerWidth, page.outerHeight, page.innerWidth, page.innerHeight] as Array<number>,
    worker,
    serviceWorker
  }
}

type Tells = Awaited<ReturnType<typeof readTells>>

const assertNoTell = (tells: Tells, where: string) => {
  assert.notMatch(tells.userAgent, /headless/i, `${where}: user agent`)
  assert.match(
    tells.userAgent,
    /^Mozilla\/5\.0 \(X11; Linux [^)]+\) .* Chrome\/\d+\.0\.0\.0 Safari\/537\.36$/
  )
  assert.isFalse(tells.webdriver, `${where}: navigator.webdriver`)
  assert.isNotEmpty(tells.languages, `${where}: navigator.languages`)
  assert.isAbove(tells.plugins, 0, `${where}: plugins`)
  assert.strictEqual(tells.chrome, "object", `${where}: window.chrome`)
  assert.notInclude(tells.brands.join(","), "Headless", `${where}: client hints`)
  // A desktop Chrome asks before it notifies: both reads agree.
  assert.deepStrictEqual([tells.notification, tells.permission], ["default", "prompt"], where)
  const [screenWidth, screenHeight] = tells.screen
  const [outerWidth, outerHeight, innerWidth, innerHeight] = tells.window
  assert.isAtLeast(screenWidth!, outerWidth!, `${where}: the window fits the screen`)
  assert.isAtLeast(screenHeight!, outerHeight!, `${where}: the window fits the screen`)
  assert.isAtLeast(outerWidth!, innerWidth!, `${where}: the window holds its page`)
  assert.isAtLeast(outerHeight!, innerHeight!, `${where}: the window holds its page`)
  assert.deepStrictEqual(tells.worker, [tells.userAgent, false, tells.languages], `${where}: a worker`)
  assert.deepStrictEqual(tells.serviceWorker, [tells.userAgent], `${where}: a service worker`)
}

layer(TestService.layer({ browserPoolSize: 1 }), { excludeTestServices: true })("headless tells", (it) => {
  const session = (body: object) =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const { key } = yield* signUp(service.baseUrl)
      const created = yield* request(service.baseUrl, "POST", "/v1/sessions", { key, body })
      assert.strictEqual(created.status, 201, created.text)
      yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
      return { key, id: created.json.id as string, cdpUrl: created.json.cdp_url as string, service }
    })

  it.effect(
    "a warm browser's first page and a page puppeteer opens later read as a desktop Chromium, their workers too, and every request says so",
    () =>
      Effect.gen(function* () {
        const { key, id, cdpUrl, service } = yield* session({})
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
        assertNoTell(yield* Effect.promise(() => first.evaluate(readTells)), "the first page")
        const later = yield* Effect.promise(() => browser.newPage())
        yield* Effect.promise(() => later.goto(`${pages.url}/later`))
        assertNoTell(yield* Effect.promise(() => later.evaluate(readTells)), "a later page")
        assert.isAbove(pages.seen.length, 4)
        for (const seen of pages.seen) assert.notMatch(seen.userAgent, /headless/i, "a request's User-Agent")
        yield* Effect.promise(() => browser.disconnect())
        yield* request(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })
      })
  )

  it.effect("a context session driven by playwright reads the same", () =>
    Effect.gen(function* () {
      const { key, id, cdpUrl, service } = yield* session({ isolation: "context" })
      const pages = yield* site
      const browser = yield* Effect.promise(() =>
        chromium.connectOverCDP(cdpUrl, { headers: { Authorization: `Bearer ${key}` } })
      )
      const page = yield* Effect.promise(() => browser.contexts()[0]!.newPage())
      yield* Effect.promise(() => page.goto(`${pages.url}/`))
      const tells = yield* Effect.promise(() => page.evaluate(readTells))
      assertNoTell(tells, "a playwright page")
      yield* Effect.promise(() => browser.close())
      yield* request(service.baseUrl, "DELETE", `/v1/sessions/${id}`, { key })
    })
  )
})
