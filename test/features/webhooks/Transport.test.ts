import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { post } from "../../../src/features/webhooks/Transport.ts"

/** A real endpoint on loopback that `handle`s each request. */
const endpoint = (handle: Http.RequestListener) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const server = Http.createServer(handle)
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      return server
    }),
    (server) =>
      Effect.promise(() => {
        server.closeAllConnections()
        return new Promise<void>((resolve) => server.close(() => resolve()))
      })
  ).pipe(
    Effect.map((server) => ({
      url: new URL(`http://webhooks.example:${(server.address() as AddressInfo).port}/hook`),
      address: "127.0.0.1",
      family: 4 as const
    }))
  )

describe("webhook transport", () => {
  it.live("connects to the checked address, not the URL's host, and keeps 1 KB of the answer", () =>
    Effect.gen(function* () {
      let host = ""
      const target = yield* endpoint((request, response) => {
        host = request.headers.host ?? ""
        response.end("y".repeat(5000))
      })
      // `webhooks.example` does not resolve: only the pinned address can have answered.
      const outcome = yield* Effect.promise(() => post(target, { "webhook-id": "evt_1" }, "{}"))
      assert.strictEqual(outcome.statusCode, 200)
      assert.strictEqual(outcome.excerpt, "y".repeat(1024))
      assert.strictEqual(host, `webhooks.example:${target.url.port}`)
    }).pipe(Effect.scoped)
  )

  it.live("gives up on an endpoint that does not answer in time", () =>
    Effect.gen(function* () {
      const target = yield* endpoint(() => {})
      const outcome = yield* Effect.promise(() => post(target, {}, "{}", false, 300))
      assert.deepStrictEqual(outcome, { statusCode: null, error: "no answer within 0.3 s", excerpt: null })
    }).pipe(Effect.scoped)
  )
})
