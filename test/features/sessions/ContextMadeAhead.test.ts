import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import puppeteer from "puppeteer-core"
import { metricValue, openSession, request, signUp } from "../../support/Client.ts"
import { until } from "../../support/Poll.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import * as TestService from "../../support/TestService.ts"

// Contexts made ahead sized by the account's demand: an account whose context
// sessions come together gets as many made ahead as came together lately
// (up to CONTEXT_WARM_MAX), and one again once its creates slow down
// (none for CONTEXT_DEMAND_SECONDS).

const WARM_MAX = 3
/**
 * How long creates that came together keep their contexts made ahead: shorter than the default, yet
 * long enough for a burst's sessions to be used and ended within it on a loaded machine (at 6 s, a
 * run of the whole suite saw the demand expire before the burst had ended).
 */
const DEMAND_SECONDS = 15

layer(
  TestService.layer({
    browserPoolSize: 1,
    contextStandby: false,
    contextWarmMax: WARM_MAX,
    contextDemandSeconds: DEMAND_SECONDS
  }),
  {
    excludeTestServices: true
  }
)("context sessions: contexts made ahead by demand", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  /** `rbs_context_acquires_total{result}`: contexts handed over made ahead (`warm`) or made for the session. */
  const acquires = (result: "warm" | "cold") =>
    Effect.map(api("GET", "/metrics"), (metrics) =>
      metricValue(metrics.text, "rbs_context_acquires_total", `result="${result}"`)
    )

  /** `/readyz`'s `context_pool`: contexts made ahead now, and how many the node keeps. */
  const contextPool = Effect.map(
    api("GET", "/readyz"),
    (ready) => ready.json.context_pool as { idle: number; target: number }
  )

  /** `count` context sessions asked for at once, each once ready. */
  const burst = (key: string, count: number) =>
    Effect.flatMap(TestService.TestService, (service) =>
      Effect.forEach(
        Array.from({ length: count }),
        () => openSession(service.baseUrl, key, { isolation: "context" }),
        { concurrency: "unbounded" }
      )
    )

  const end = (key: string, sessions: ReadonlyArray<{ id: string }>) =>
    Effect.forEach(sessions, (session) =>
      Effect.map(api("DELETE", `/v1/sessions/${session.id}`, { key }), (answer) =>
        assert.strictEqual(answer.status, 204)
      )
    )

  /** Loads `url` in the session's first page: the cookie it found there, then sets one. */
  const visit = (session: { cdp_url: string }, key: string, url: string) =>
    Effect.promise(async () => {
      const browser = await puppeteer.connect({
        browserWSEndpoint: session.cdp_url,
        headers: { Authorization: `Bearer ${key}` },
        defaultViewport: null
      })
      try {
        const [page] = await browser.pages()
        await page!.goto(url)
        const found = await page!.evaluate("document.cookie + '|' + localStorage.length")
        await page!.evaluate(`document.cookie = "seen=1; max-age=600"; localStorage.setItem("seen", "1")`)
        return found
      } finally {
        await browser.disconnect()
      }
    })

  it.effect(
    "a burst makes as many ahead for the next (each found wiped), up to CONTEXT_WARM_MAX; one again once creates slow",
    () =>
      Effect.gen(function* () {
        const { key } = yield* signUp((yield* TestService.TestService).baseUrl)
        const page = yield* LocalPage.serve

        // One session: its shared browser keeps one made ahead.
        const first = yield* burst(key, 1)
        yield* end(key, first)
        yield* until(contextPool, (pool) => pool.idle === 1 && pool.target === 1, 30_000)

        // Five at once: the account wants more than one; once they end, up to CONTEXT_WARM_MAX are made.
        const crowdAsked = Date.now()
        const crowd = yield* burst(key, 5)
        // One of them leaves a cookie and storage behind (the rest are not used: the demand counts for a while only).
        assert.strictEqual(yield* visit(crowd[0]!, key, page), "|0")
        yield* end(key, crowd)
        const ahead = yield* until(
          contextPool,
          (pool) => pool.target > 1 && pool.idle === pool.target,
          30_000
        )
        assert.isAtMost(ahead.target, WARM_MAX, "never more than CONTEXT_WARM_MAX")

        // As many at once again: each finds its context made ahead, and nothing of the last sessions in it.
        const [warm, cold] = [yield* acquires("warm"), yield* acquires("cold")]
        const next = yield* burst(key, ahead.target)
        assert.strictEqual((yield* acquires("warm")) - warm, ahead.target, "each handed one made ahead")
        assert.strictEqual((yield* acquires("cold")) - cold, 0, "none made on the session's path")
        for (const session of next) assert.strictEqual(yield* visit(session, key, page), "|0")
        yield* end(key, next)
        // Made ahead again once they have gone: the demand holds.
        yield* until(contextPool, (pool) => pool.target > 1 && pool.idle === pool.target, 30_000)

        // No create for the demand's window (CONTEXT_DEMAND_SECONDS): the extra ones are disposed, one stays.
        yield* until(contextPool, (pool) => pool.idle === 1 && pool.target === 1, 30_000)
        assert.isAtLeast(
          Date.now() - crowdAsked,
          DEMAND_SECONDS * 1000,
          "not before the demand's window has passed"
        )
      }).pipe(Effect.scoped),
    90_000
  )
})
