import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import puppeteer from "puppeteer-core"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as LocalPage from "../../support/LocalPage.ts"
import { ownerOf, placementSettled, startNode } from "../../support/Nodes.ts"
import * as TestService from "../../support/TestService.ts"

// The nodes' network is open to sessions here (`EGRESS_ALLOW_CIDRS` takes in loopback, where the
// nodes and the test's pages listen, as an operator opens an intranet): a page still reaches no
// node's HTTP server and no runner, its own node's or another's, and the test's own page loads.

describe("several nodes: their ports", () => {
  it.live(
    "a session's page reaches no node's HTTP server or runner port, even where EGRESS_ALLOW_CIDRS opens their network",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const a = yield* startNode(databaseUrl)
        const b = yield* startNode(databaseUrl)
        yield* placementSettled(databaseUrl, [a, b])
        const page = yield* LocalPage.serve
        const account = yield* signUp(a.baseUrl)
        const created = yield* request(a.baseUrl, "POST", "/v1/sessions", { key: account.key, body: {} })
        assert.strictEqual(created.status, 201, created.text)
        const session = yield* waitForSession(a.baseUrl, account.key, created.json.id, isReady)
        const owner = (yield* ownerOf(databaseUrl, session.id)).node_id
        const { browser, tab } = yield* Effect.acquireRelease(
          Effect.promise(async () => {
            const browser = await puppeteer.connect({
              browserWSEndpoint: session.cdp_url,
              headers: { Authorization: `Bearer ${account.key}` }
            })
            return { browser, tab: await browser.newPage() }
          }),
          ({ browser }) => Effect.promise(() => browser.disconnect().catch(() => {}))
        )
        const visit = (url: string) =>
          Effect.promise(async () => {
            const response = await tab.goto(url).catch((error: Error) => error)
            if (response instanceof Error) return { status: 0, text: response.message }
            const text = await tab.evaluate(() => (globalThis as any).document.body.innerText as string)
            return { status: response?.status() ?? 0, text }
          })

        const allowed = yield* visit(`${page}?title=allowed`)
        assert.strictEqual(allowed.status, 200, "the nodes' network is open to the session")

        for (const node of [a, b]) {
          const mine = node.nodeId === owner ? "its own node" : "another node"
          const http = yield* visit(`${node.baseUrl}/healthz`)
          assert.strictEqual(http.status, 403, `${mine}'s HTTP server: ${http.text}`)
          assert.include(http.text, "one of the service's own ports")
          const runner = yield* visit(`http://${node.env.RUNNER_ADDRESS}/`)
          assert.strictEqual(runner.status, 403, `${mine}'s runner: ${runner.text}`)
          assert.include(runner.text, "one of the service's own ports")
        }
        void browser
      }).pipe(Effect.scoped),
    180_000
  )
})
