import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import WebSocket from "ws"
import { request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

// A session's downloads dir is set up after its ready (off the create's path), in a browser of its
// own and in a context alike: a client's connection waits for it, and a session whose dir could not
// be made ends and takes no client.

/** The status of a CDP WebSocket's upgrade: 101 taken, or the answer before it. */
const upgrade = (url: string, key: string) =>
  Effect.promise(
    () =>
      new Promise<number>((resolve) => {
        const socket = new WebSocket(url, { headers: { authorization: `Bearer ${key}` } })
        socket.once("open", () => {
          socket.close()
          resolve(101)
        })
        socket.once("unexpected-response", (_request, response) => {
          resolve(response.statusCode ?? 0)
          socket.terminate()
        })
        socket.once("error", () => resolve(0))
      })
  )

layer(TestService.layer({ browserPoolSize: 1, contextStandby: false }), { excludeTestServices: true })(
  "a session's downloads dir",
  (it) => {
    for (const isolation of ["context", "browser"] as const)
      it.effect(
        `that cannot be made ends the session (launch_failed) and no client is taken: ${isolation}`,
        () =>
          Effect.gen(function* () {
            const service = yield* TestService.TestService
            const { key } = yield* signUp(service.baseUrl)
            const create = () =>
              request(service.baseUrl, "POST", "/v1/sessions", { key, body: { isolation } })
            // A session of the kind first (the account's shared browser up, a context made ahead in it).
            const first = yield* create()
            assert.strictEqual(first.status, 201)
            yield* waitForSession(service.baseUrl, key, first.json.id, (s) => s.status === "ready")
            assert.strictEqual(yield* upgrade(first.json.cdp_url, key), 101)
            yield* request(service.baseUrl, "DELETE", `/v1/sessions/${first.json.id}`, { key })

            // The downloads root made a file: no session's dir can be made under it.
            const root = Path.join(service.config.dataDir, "downloads")
            const aside = `${root}.aside`
            yield* Effect.acquireRelease(
              Effect.promise(async () => {
                await Fs.rename(root, aside)
                await Fs.writeFile(root, "")
              }),
              () =>
                Effect.promise(async () => {
                  await Fs.rm(root, { force: true })
                  await Fs.rename(aside, root)
                })
            )
            const second = yield* create()
            assert.strictEqual(second.status, 201)
            const ended = yield* waitForSession(
              service.baseUrl,
              key,
              second.json.id,
              (s) => s.status === "error" || s.status === "closed"
            )
            assert.strictEqual(ended.status, "error")
            assert.strictEqual(ended.ended_reason, "launch_failed")
            assert.strictEqual(yield* upgrade(second.json.cdp_url, key), 409)
          }),
        60_000
      )
  }
)
