import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as FsSync from "node:fs"
import * as Path from "node:path"
import * as Cell from "../../../src/runtimes/browser/Cell.ts"
import * as Cells from "../../support/Cells.ts"
import { openSession, request, signUp, waitForSession } from "../../support/Client.ts"
import * as RawCdp from "../../support/RawCdp.ts"
import { startService } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"
import * as TrafficServer from "../../support/TrafficServer.ts"
import { NOBODY, reachableBy } from "../../support/Users.ts"

// The cell every browser runs in (native/cell.c), checked from the host, and driven with no guard in
// front of it: a client with every freedom CDP gives still reaches nothing but its session's egress
// proxy, and reads nothing but its own profile.

const namespace = (pid: number | "self", kind: string) => FsSync.readlinkSync(`/proc/${pid}/ns/${kind}`)

/** The first dir of an absolute path (`/a/b` is `a`). */
const top = (path: string) => path.split("/")[1]!

/** Every structural promise of a cell, checked on the running browser of `cellDir`. */
const checkCell = (
  cellDir: string,
  options: { readonly dataDir: string; readonly sessionId: string; readonly others: ReadonlyArray<string> }
) => {
  const { chromium, group } = Cells.processesOf(cellDir)
  for (const kind of ["net", "mnt", "pid", "ipc"])
    assert.notStrictEqual(namespace(chromium, kind), namespace("self", kind), `its own ${kind} namespace`)

  // Its network: loopback alone, no route, nothing listening but on its loopback (DevTools, its proxy).
  const devices = FsSync.readFileSync(`/proc/${chromium}/net/dev`, "utf8").trim().split("\n").slice(2)
  assert.deepStrictEqual(
    devices.map((line) => line.trim().split(":")[0]),
    ["lo"]
  )
  assert.strictEqual(FsSync.readFileSync(`/proc/${chromium}/net/route`, "utf8").trim().split("\n").length, 1)
  const inside = [...Cells.listening(chromium).values()]
  assert.isNotEmpty(inside)
  for (const local of inside) assert.match(local, /^0100007F:/, `listens on ${local}, not its loopback`)
  // No process of the browser holds a socket listening in the host's network namespace.
  const host = Cells.listening("self")
  for (const pid of group)
    for (const inode of Cells.socketsOf(pid))
      assert.isFalse(host.has(inode), `pid ${pid} listens on the host's ${host.get(inode)}`)

  // Its view: the system's files, its profile, its /tmp and its session's downloads; none of the data dir.
  const profileDir = Cells.profileOf(chromium)
  const allowed = new Set([
    "bin",
    "dev",
    "etc",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "proc",
    "sbin",
    "sys",
    "tmp",
    "usr",
    "var"
  ])
  allowed.add(top(options.dataDir))
  allowed.add(top(profileDir))
  const root = Cells.viewOf(chromium, "/")!
  for (const entry of root) assert.isTrue(allowed.has(entry), `/${entry} is in the browser's view`)
  for (const hidden of ["home", "root", "run", "mnt", "opt", "srv"]) assert.notInclude(root, hidden)
  const inData = Cells.viewOf(chromium, options.dataDir)!
  for (const entry of inData)
    assert.include(["downloads", "profiles"], entry, `${entry} of the data dir is in the browser's view`)
  assert.deepStrictEqual(Cells.viewOf(chromium, Path.join(options.dataDir, "downloads")), [options.sessionId])
  assert.isUndefined(Cells.viewOf(chromium, Path.join(options.dataDir, "blobs")))
  assert.isFalse(FsSync.existsSync(`/proc/${chromium}/root${options.dataDir}/secrets.json`))
  assert.isDefined(Cells.viewOf(chromium, profileDir), "its own profile")
  for (const other of options.others)
    assert.isUndefined(Cells.viewOf(chromium, other), `another's profile ${other}`)
  return { chromium, profileDir }
}

layer(TestService.layer(), { excludeTestServices: true })("a browser's cell", (it) => {
  it.effect(
    "each Chromium has network, mount and PID namespaces of its own, listens on no port of the host's, and sees nothing of the data dir but its own",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const dataDir = service.config.dataDir
        const account = yield* signUp(service.baseUrl)
        const a = yield* openSession(service.baseUrl, account.key)
        const b = yield* openSession(service.baseUrl, account.key)
        const context = yield* openSession(service.baseUrl, account.key, { isolation: "context" })
        const cellA = yield* Cells.cellOfSession(dataDir, a.id)
        const cellB = yield* Cells.cellOfSession(dataDir, b.id)
        const cellC = yield* Cells.cellOfSession(dataDir, context.id)
        const profileOf = (dir: string) => Cells.profileOf(Cells.processesOf(dir).chromium)
        const seenA = checkCell(cellA, {
          dataDir,
          sessionId: a.id,
          others: [profileOf(cellB), profileOf(cellC)]
        })
        const seenB = checkCell(cellB, {
          dataDir,
          sessionId: b.id,
          others: [profileOf(cellA), profileOf(cellC)]
        })
        const seenC = checkCell(cellC, { dataDir, sessionId: context.id, others: [profileOf(cellA)] })
        for (const [one, other] of [
          [seenA, seenB],
          [seenA, seenC],
          [seenB, seenC]
        ] as const)
          assert.notStrictEqual(namespace(one.chromium, "net"), namespace(other.chromium, "net"))
        // The cell's dir is the service's alone: its sockets reach the browser's DevTools and proxy.
        for (const dir of [cellA, cellB, cellC]) {
          assert.strictEqual(FsSync.statSync(dir).mode & 0o777, 0o700)
          assert.strictEqual(FsSync.statSync(Cell.devtoolsSocket(dir)).mode & 0o777, 0o600)
        }
        for (const opened of [a, b, context]) {
          yield* request(service.baseUrl, "DELETE", `/v1/sessions/${opened.id}`, { key: account.key })
          yield* waitForSession(service.baseUrl, account.key, opened.id, (s) => s.status === "closed")
        }
      })
  )

  it.effect(
    "a shared browser's cell forwards a port for each live context, and no more as contexts come and go",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const dataDir = service.config.dataDir
        const account = yield* signUp(service.baseUrl)
        let cellDir: string | undefined
        for (let i = 0; i < 10; i++) {
          const opened = yield* openSession(service.baseUrl, account.key, { isolation: "context" })
          cellDir ??= yield* Cells.cellOfSession(dataDir, opened.id)
          yield* request(service.baseUrl, "DELETE", `/v1/sessions/${opened.id}`, { key: account.key })
          yield* waitForSession(service.baseUrl, account.key, opened.id, (s) => s.status === "closed")
        }
        const { chromium } = Cells.processesOf(cellDir!)
        // DevTools, the browser's own proxy, and one a context: those made ahead (CONTEXT_WARM_MAX, 4, at
        // most) and one being made or disposed; ten sessions' worth were it not given back.
        const ports = Cells.listening(chromium).size
        assert.isAtMost(ports, 2 + 4 + 1, `${ports} ports listen in the cell`)
      })
  )

  it.effect(
    "with no guard in front, a client with every freedom reaches nothing but the session's proxy, and every byte it moves is metered",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const dataDir = service.config.dataDir
        const account = yield* signUp(service.baseUrl)
        const opened = yield* openSession(service.baseUrl, account.key)
        // A server on the host's loopback: a proxy of the client's choosing, and a destination.
        const trap = yield* TrafficServer.serve("127.0.0.1")
        const cellDir = yield* Cells.cellOfSession(dataDir, opened.id)
        // Straight to Chromium's DevTools, as the service reaches it: no relay, no guard.
        const cdp = yield* RawCdp.connect(yield* Cells.devtools(cellDir))
        let id = 1
        /** A page in a new context with `proxyServer`, sent to `url`: its navigation's answer. */
        const visit = (proxyServer: string | undefined, url: string) =>
          Effect.gen(function* () {
            const made = yield* cdp.call(
              id++,
              "Target.createBrowserContext",
              proxyServer === undefined ? {} : { proxyServer, proxyBypassList: "<-loopback>" }
            )
            assert.isString(made.result?.browserContextId, JSON.stringify(made))
            const target = yield* cdp.call(id++, "Target.createTarget", {
              url: "about:blank",
              browserContextId: made.result.browserContextId
            })
            const attached = yield* cdp.call(id++, "Target.attachToTarget", {
              targetId: target.result.targetId,
              flatten: true
            })
            const sessionId: string = attached.result.sessionId
            const navigated = yield* cdp.call(id++, "Page.navigate", { url }, sessionId)
            return { navigated: navigated.result, sessionId }
          })

        // A proxy of its own choosing on the host's loopback, or none at all: nothing leaves the cell.
        const own = yield* visit(`http://127.0.0.1:${trap.port}`, "http://example.test/")
        assert.match(own.navigated.errorText, /ERR_PROXY_CONNECTION_FAILED|ERR_TUNNEL_CONNECTION_FAILED/)
        const direct = yield* visit("direct://", `${trap.http}/bytes?n=8000000`)
        assert.match(direct.navigated.errorText, /ERR_/, JSON.stringify(direct.navigated))
        const service80 = yield* visit("direct://", `${service.baseUrl}/healthz`)
        assert.match(service80.navigated.errorText, /ERR_/, "the service's own port, direct")
        assert.deepStrictEqual(trap.requests(), [], "the host's loopback saw nothing of the cell")

        // Its way out, named as a proxy of its own: the session's proxy, which meters it.
        const metered = yield* visit(`http://127.0.0.1:${Cell.PROXY_PORT}`, `${trap.http}/page`)
        assert.isUndefined(metered.navigated.errorText)
        const fetched = yield* cdp.call(
          id++,
          "Runtime.evaluate",
          {
            expression: `fetch("${trap.http}/bytes?n=8000000").then((r) => r.arrayBuffer()).then((b) => b.byteLength)`,
            awaitPromise: true,
            returnByValue: true
          },
          metered.sessionId
        )
        assert.strictEqual(fetched.result.result.value, 8_000_000)

        // The host's files: its own view alone, whatever it opens.
        const secret = Path.join(dataDir, "secrets.json")
        const file = yield* visit(undefined, `file://${secret}`)
        const text = yield* cdp.call(
          id++,
          "Runtime.evaluate",
          { expression: "document.body ? document.body.innerText : ''", returnByValue: true },
          file.sessionId
        )
        const key = JSON.parse(FsSync.readFileSync(secret, "utf8"))
        for (const value of Object.values(key))
          assert.notInclude(String(text.result.result.value), String(value), "the service's secrets")

        // Every byte it moved is the session's: what the host's server sent, and more (headers, TLS).
        yield* request(service.baseUrl, "DELETE", `/v1/sessions/${opened.id}`, { key: account.key })
        const ended = yield* waitForSession(
          service.baseUrl,
          account.key,
          opened.id,
          (s) => s.status === "closed"
        )
        assert.isAtLeast(ended.bytes_down, trap.counts().bytesOut)
        assert.isAtLeast(ended.bytes_down, 8_000_000)
      }).pipe(Effect.scoped),
    60_000
  )
})

describe("a browser's cell, the service not root", () => {
  it.live(
    "a user namespace of its own gives the same view: no host network, none of the data dir",
    () =>
      Effect.gen(function* () {
        // As root the service runs its browsers as users of their own; this is the other case.
        if (process.getuid?.() !== 0 || !reachableBy(NOBODY)) return
        const dataDir = yield* TestService.freshDataDir
        FsSync.chownSync(dataDir, NOBODY.uid, NOBODY.gid)
        const env = {
          DATA_DIR: dataDir,
          PORT: String(yield* TestService.freePort),
          BROWSER_POOL_SIZE: "0",
          SIGNUP_CREDIT_USD: "5"
        }
        const { baseUrl } = yield* startService(env, undefined, { user: NOBODY })
        const account = yield* signUp(baseUrl)
        const opened = yield* openSession(baseUrl, account.key)
        const cellDir = yield* Cells.cellOfSession(dataDir, opened.id)
        const { chromium } = checkCell(cellDir, { dataDir, sessionId: opened.id, others: [] })
        assert.notStrictEqual(namespace(chromium, "user"), namespace("self", "user"), "a user namespace")
        const uid = /^Uid:\s+(\d+)/m.exec(FsSync.readFileSync(`/proc/${chromium}/status`, "utf8"))![1]
        assert.strictEqual(Number(uid), NOBODY.uid, "the service's own user")
        // No guard in front: a context with no proxy reaches nothing of the host.
        const trap = yield* TrafficServer.serve("127.0.0.1")
        const cdp = yield* RawCdp.connect(yield* Cells.devtools(cellDir))
        const made = yield* cdp.call(1, "Target.createBrowserContext", { proxyServer: "direct://" })
        const target = yield* cdp.call(2, "Target.createTarget", {
          url: "about:blank",
          browserContextId: made.result.browserContextId
        })
        const attached = yield* cdp.call(3, "Target.attachToTarget", {
          targetId: target.result.targetId,
          flatten: true
        })
        const navigated = yield* cdp.call(
          4,
          "Page.navigate",
          { url: `${trap.http}/page` },
          attached.result.sessionId
        )
        assert.match(navigated.result.errorText, /ERR_/)
        assert.deepStrictEqual(trap.requests(), [])
      }).pipe(Effect.scoped),
    120_000
  )
})
