import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as FsSync from "node:fs"
import * as Http from "node:http"
import { MAX_BODY_BYTES } from "../../../src/kernel/Validation.ts"
import * as Cell from "../../../src/runtimes/browser/Cell.ts"
import * as Cells from "../../support/Cells.ts"
import { openSession, signUp } from "../../support/Client.ts"
import { startService } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"

// The service's API name (`api.rbs.internal`) through a session's egress proxy, as a page or a
// sandbox reaches it: a body is passed on as it comes, never held whole, and one past the service's
// body limit is refused without the service's memory growing with it.

const MiB = 1024 * 1024

/** The peak resident memory of `pid` so far (`VmHWM`), in bytes. */
const peakOf = (pid: number) =>
  Number(/^VmHWM:\s+(\d+) kB/m.exec(FsSync.readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024

/** POSTs `bytes` zero bytes to `url` through the proxy at `socket` (with a length, or chunked): its status and body. */
const post = (socket: string, url: string, bytes: number, withLength: boolean, key: string) =>
  Effect.promise(
    () =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const request = Http.request(
          {
            socketPath: socket,
            method: "POST",
            path: url,
            headers: {
              host: new URL(url).host,
              "content-type": "application/json",
              authorization: `Bearer ${key}`,
              ...(withLength ? { "content-length": String(bytes) } : {})
            }
          },
          (response) => {
            let body = ""
            response.on("data", (chunk) => (body += chunk))
            response.on("end", () => resolve({ status: response.statusCode ?? 0, body }))
          }
        )
        // The proxy may answer, and close, before the whole body is sent.
        request.on("error", (error) => (request.writableEnded ? undefined : reject(error)))
        const chunk = Buffer.alloc(MiB)
        let sent = 0
        const pump = () => {
          while (sent < bytes) {
            sent += chunk.length
            if (!request.write(chunk)) return request.once("drain", pump)
          }
          request.end()
        }
        request.on("close", () => (sent = bytes))
        pump()
      })
  )

describe("the service's API name through a session's proxy", () => {
  it.live(
    "a body past the service's limit is refused 413, with a length or without, and the service never holds it",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        const env = {
          DATA_DIR: dataDir,
          DATABASE_URL: yield* TestService.freshDatabase,
          PORT: String(yield* TestService.freePort),
          BROWSER_POOL_SIZE: "0",
          SIGNUP_CREDIT_USD: "5"
        }
        const { baseUrl, child } = yield* startService(env)
        const account = yield* signUp(baseUrl)
        const session = yield* openSession(baseUrl, account.key)
        const socket = Cell.egressSocket(yield* Cells.cellOfSession(dataDir, session.id), Cell.PROXY_PORT)
        const url = "http://api.rbs.internal/v1/assistants/asst_none/usage-events"
        for (const withLength of [false, true]) {
          const before = peakOf(child.pid!)
          const refused = yield* post(socket, url, 64 * MiB, withLength, account.key)
          assert.strictEqual(refused.status, 413, refused.body)
          assert.strictEqual(JSON.parse(refused.body).error.code, "payload_too_large")
          // Said in advance: never read. Chunked: what passes the proxy before the limit, and what the
          // route reads up to it, both streamed (at their peak before the collector catches up).
          const grew = peakOf(child.pid!) - before
          const bound = withLength ? 8 * MiB : 3 * MAX_BODY_BYTES
          assert.isBelow(
            grew,
            bound,
            `${withLength ? "with" : "without"} a length, the service's peak grew ${Math.round(grew / MiB)} MiB`
          )
        }
        // A body within the limit still reaches the route: an assistant this account does not have.
        const small = yield* post(socket, url, 0, true, account.key)
        assert.strictEqual(small.status, 400, small.body)
      }).pipe(Effect.scoped),
    120_000
  )
})
