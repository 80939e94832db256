import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as FsSync from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import type { Socket } from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { chromium } from "playwright-core"
import puppeteer from "puppeteer-core"
import WebSocket, { WebSocketServer } from "ws"
import * as Cdp from "../../../src/platform/cdp/CdpClient.ts"
import { executableOf } from "../../../src/runtimes/browser/Chromium.ts"
import * as CdpGuard from "../../../src/runtimes/browser/CdpGuard.ts"
import * as ContextScope from "../../../src/runtimes/context/ContextScope.ts"
import { spliceScoped } from "../../../src/platform/net/Splice.ts"

// The scoped splice between real clients (puppeteer, playwright) and a real
// Chromium that holds two contexts, A and B, each with a page: a client
// scoped to A sees a browser whose only context is A, works in it unchanged,
// and reaches nothing of B. (Sessions of `isolation: "context"` through the
// service are in test/features/sessions/ContextSessions.test.ts.)

interface Browser {
  readonly endpoint: string
  readonly control: Cdp.CdpClient
  readonly close: () => Promise<void>
}

const launch = async (): Promise<Browser> => {
  const profile = FsSync.mkdtempSync(Path.join(Os.tmpdir(), "rbs-ctx-relay-"))
  const child: ChildProcess = spawn(
    executableOf("/usr/bin/chromium"),
    [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--remote-debugging-address=127.0.0.1",
      "--remote-debugging-port=0",
      `--user-data-dir=${profile}`,
      "about:blank"
    ],
    { stdio: ["ignore", "ignore", "pipe"], detached: true }
  )
  // Its process group goes with the test worker even if a failure skips the finalizer.
  const killGroup = () => {
    try {
      process.kill(-child.pid!, "SIGKILL")
    } catch {
      // gone
    }
  }
  process.once("exit", killGroup)
  const endpoint = await new Promise<string>((resolve, reject) => {
    let output = ""
    child.stderr!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      const match = /DevTools listening on (ws:\/\/\S+)/.exec(output)
      if (match) resolve(match[1]!)
    })
    child.once("exit", () => reject(new Error(`chromium exited: ${output}`)))
  })
  const connection = Scope.makeUnsafe()
  const control = await Effect.runPromise(Cdp.connect(endpoint).pipe(Scope.provide(connection)))
  return {
    endpoint,
    control,
    close: async () => {
      await Effect.runPromise(Scope.close(connection, Exit.void))
      const exited = new Promise((resolve) => child.once("exit", resolve))
      killGroup()
      process.off("exit", killGroup)
      await exited
      FsSync.rmSync(profile, { recursive: true, force: true })
    }
  }
}

/** A relay on loopback that gives each client its own connection to `endpoint`, scoped to `contextId`. */
const relay = async (endpoint: string, contextId: string) => {
  const server = Http.createServer((_, response) => response.writeHead(404).end())
  const clients = new WebSocketServer({ noServer: true, perMessageDeflate: false })
  const open = new Set<WebSocket>()
  // As the service's relay does: Chromium's end first, then the client's, whose frames wait in its
  // socket until the splice reads them.
  server.on("upgrade", (request, socket, head) => {
    const upstream = new WebSocket(endpoint, { perMessageDeflate: false })
    let upstreamSocket: Socket | undefined
    upstream.once("upgrade", (response) => (upstreamSocket = response.socket as Socket))
    upstream.once("open", () =>
      clients.handleUpgrade(request, socket as Socket, head, (ws) => {
        open.add(ws)
        void Effect.runPromise(
          spliceScoped(
            { ws, socket: socket as Socket },
            { ws: upstream, socket: upstreamSocket! },
            ContextScope.make({ contextId }),
            (frame, binary) =>
              CdpGuard.inspect(frame, binary, {
                downloadsDir: Os.tmpdir(),
                uploadsDir: "/nonexistent/uploads"
              })
          )
        ).finally(() => {
          ws.terminate()
          upstream.terminate()
        })
      })
    )
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `ws://127.0.0.1:${port}/devtools/browser/scoped`,
    close: async () => {
      for (const ws of open) ws.terminate()
      await new Promise((resolve) => server.close(resolve))
    }
  }
}

interface Target {
  readonly targetId: string
  readonly type: string
  readonly url: string
  readonly browserContextId?: string
}

/** A command on the test's own control connection, awaited. */
const cdp = <A>(command: Effect.Effect<A, Cdp.CdpError>) => Effect.runPromise(command)

const targets = async (control: Cdp.CdpClient) =>
  (await cdp(control.send<{ targetInfos: Array<Target> }>("Target.getTargets"))).targetInfos.filter(
    (target) => target.type === "page"
  )

/** Chromium with contexts A and B, a page in each (B's on a page that says so), and a relay scoped to A. */
const setUp = Effect.acquireRelease(
  Effect.promise(async () => {
    const browser = await launch()
    const context = async () =>
      (await cdp(browser.control.send<{ browserContextId: string }>("Target.createBrowserContext", {})))
        .browserContextId
    const a = await context()
    const b = await context()
    const pageA = (
      await cdp(
        browser.control.send<{ targetId: string }>("Target.createTarget", {
          url: "about:blank",
          browserContextId: a
        })
      )
    ).targetId
    const pageB = (
      await cdp(
        browser.control.send<{ targetId: string }>("Target.createTarget", {
          url: "data:text/html,<title>B</title>",
          browserContextId: b
        })
      )
    ).targetId
    const scoped = await relay(browser.endpoint, a)
    return { browser, a, b, pageA, pageB, scoped }
  }),
  ({ browser, scoped }) =>
    Effect.promise(async () => {
      await scoped.close()
      await browser.close()
    })
)

describe("a CDP connection scoped to one browser context", () => {
  it.live(
    "puppeteer sees one page, its context's, works there unchanged, and reaches nothing of the other context",
    () =>
      Effect.gen(function* () {
        const { browser, a, b, pageA, pageB, scoped } = yield* setUp
        yield* Effect.promise(async () => {
          const client = await puppeteer.connect({ browserWSEndpoint: scoped.url, defaultViewport: null })
          try {
            const pages = await client.pages()
            assert.strictEqual(pages.length, 1)
            assert.strictEqual((pages[0]!.target() as unknown as { _targetId: string })._targetId, pageA)
            await pages[0]!.goto("data:text/html,<title>A</title><p>scoped</p>")
            assert.strictEqual(await pages[0]!.title(), "A")
            // A new page lands in A.
            const second = await client.newPage()
            await second.goto("data:text/html,<title>A2</title>")
            const all = await targets(browser.control)
            const created = all.find((target) => target.url.includes("A2"))
            assert.strictEqual(created?.browserContextId, a)
            assert.lengthOf(await client.pages(), 2)
            // Nothing of B: not listed, not attachable, no browser-wide command.
            const session = await client.target().createCDPSession()
            const listed = await session.send("Target.getTargets")
            assert.notInclude(
              listed.targetInfos.map((target) => target.targetId),
              pageB
            )
            for (const [method, params] of [
              ["Target.attachToTarget", { targetId: pageB, flatten: true }],
              ["Target.closeTarget", { targetId: pageB }],
              ["Target.disposeBrowserContext", { browserContextId: b }],
              ["Target.createBrowserContext", {}],
              ["SystemInfo.getProcessInfo", {}],
              ["Storage.getCookies", { browserContextId: b }]
            ] as const) {
              const refused = await session.send(method as never, params as never).then(
                () => undefined,
                (error: Error) => error.message
              )
              assert.isDefined(refused, `${method} must be refused`)
            }
            assert.isDefined(
              (await targets(browser.control)).find((target) => target.targetId === pageB),
              "B's page is still there"
            )
          } finally {
            await client.disconnect()
          }
        })
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "playwright's connectOverCDP sees one context with the page in it, and its auto-attach leaves the other context's new pages running",
    () =>
      Effect.gen(function* () {
        const { browser, a, b, scoped } = yield* setUp
        yield* Effect.promise(async () => {
          const client = await chromium.connectOverCDP(scoped.url)
          try {
            assert.lengthOf(client.contexts(), 1)
            const [context] = client.contexts()
            assert.lengthOf(context!.pages(), 1)
            const page = context!.pages()[0]!
            await page.goto("data:text/html,<title>PA</title>")
            assert.strictEqual(await page.title(), "PA")
            const other = await context!.newPage()
            await other.goto("data:text/html,<title>PA2</title>")
            assert.strictEqual(
              (await targets(browser.control)).find((target) => target.url.includes("PA2"))?.browserContextId,
              a
            )
            await context!.addCookies([{ name: "who", value: "a", url: "https://a.example/" }])
            assert.deepStrictEqual(
              (await context!.cookies()).map((cookie) => cookie.name),
              ["who"]
            )
            // B's cookie jar is untouched, and a page opened in B meanwhile runs at once (not paused
            // for the auto-attach of A's client).
            const { cookies } = await cdp(
              browser.control.send<{ cookies: Array<unknown> }>("Storage.getCookies", {
                browserContextId: b
              })
            )
            assert.deepStrictEqual(cookies, [])
            const { targetId } = await cdp(
              browser.control.send<{ targetId: string }>("Target.createTarget", {
                url: "data:text/html,<title>B2</title>",
                browserContextId: b
              })
            )
            const started = Date.now()
            const value = await cdp(
              Cdp.withPageSession(browser.control, targetId, (sessionId) =>
                browser.control.send<{ result: { value: number } }>(
                  "Runtime.evaluate",
                  { expression: "1 + 1", returnByValue: true },
                  sessionId
                )
              )
            )
            assert.strictEqual(value.result.value, 2)
            assert.isBelow(Date.now() - started, 5_000)
            assert.lengthOf(context!.pages(), 2, "B's page never reached A's client")
          } finally {
            await client.close()
          }
        })
      }).pipe(Effect.scoped),
    60_000
  )
})
