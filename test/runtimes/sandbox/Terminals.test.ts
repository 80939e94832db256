import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import WebSocket from "ws"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { until } from "../../support/Poll.ts"
import * as TestService from "../../support/TestService.ts"

/** A PTY client: every byte the terminal printed so far, its control messages, and its close. */
const openPty = (url: string, key: string) =>
  Effect.promise(
    () =>
      new Promise<{
        readonly socket: WebSocket
        readonly output: () => string
        readonly messages: Array<any>
        readonly closed: Promise<{ code: number; reason: string }>
        readonly waitFor: (text: string, timeoutMs?: number) => Promise<void>
      }>((resolve, reject) => {
        const socket = new WebSocket(url, { headers: { authorization: `Bearer ${key}` } })
        let output = ""
        const messages: Array<any> = []
        const waiters: Array<() => void> = []
        const closed = new Promise<{ code: number; reason: string }>((done) =>
          socket.once("close", (code, reason) => done({ code, reason: reason.toString() }))
        )
        socket.on("message", (data, isBinary) => {
          if (isBinary) output += data.toString()
          else messages.push(JSON.parse(data.toString()))
          for (const wake of waiters.splice(0)) wake()
        })
        socket.once("unexpected-response", (_request, response) =>
          reject(new Error(`refused: ${response.statusCode}`))
        )
        socket.once("error", reject)
        socket.once("open", () =>
          resolve({
            socket,
            output: () => output,
            messages,
            closed,
            waitFor: (text, timeoutMs = 10_000) =>
              new Promise((done, fail) => {
                const deadline = Date.now() + timeoutMs
                const check = () => {
                  if (output.includes(text)) return done()
                  if (Date.now() > deadline)
                    return fail(new Error(`no ${JSON.stringify(text)} in ${JSON.stringify(output)}`))
                  waiters.push(check)
                  setTimeout(check, 200)
                }
                check()
              })
          })
        )
      })
  )

/** A dev server for the gateway test: plain Node (the image has no npm packages), HTTP and a WebSocket echo. */
const SERVER = `
const http = require("http"), crypto = require("crypto")
const server = http.createServer((req, res) => {
  if (req.url === "/headers") return res.end(JSON.stringify(req.headers))
  if (req.url === "/cookies") {
    res.setHeader("set-cookie", ["app=2; Path=/; HttpOnly", "service_session=evil; Path=/"])
    return res.end("set")
  }
  if (req.method === "POST") { const parts = []; req.on("data", (c) => parts.push(c)); req.on("end", () => res.end("echo:" + Buffer.concat(parts))); return }
  res.end("hello from " + req.url)
})
server.on("upgrade", (req, socket) => {
  const accept = crypto.createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64")
  socket.write("HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept + "\\r\\n\\r\\n")
  socket.on("data", (frame) => {
    const length = frame[1] & 127, mask = frame.subarray(2, 6), data = Buffer.from(frame.subarray(6, 6 + length))
    for (let i = 0; i < data.length; i++) data[i] ^= mask[i % 4]
    socket.write(Buffer.concat([Buffer.from([0x81, data.length]), data]))
  })
})
server.listen(8000, "127.0.0.1")
`

const refusal = (url: string, headers: Record<string, string>) =>
  Effect.promise(
    () =>
      new Promise<number>((resolve) => {
        const socket = new WebSocket(url, { headers })
        socket.once("unexpected-response", (_request, response) => resolve(response.statusCode ?? 0))
        socket.once("open", () => {
          socket.close()
          resolve(101)
        })
        socket.once("error", () => resolve(0))
      })
  )

// Transfers unlimited by rate: the concurrent uploads' test probes every 25 ms until four are under way,
// which on a busy machine took more than LIMIT_FILE_TRANSFERS_PER_MINUTE's default 120.
layer(
  TestService.layer({
    browserPoolSize: 0,
    sandbox: { poolSize: 1 },
    limits: { fileTransfersPerMinute: 100_000 }
  }),
  { excludeTestServices: true }
)("sandbox files, terminals, self-test, bulk terminate", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  const sandbox = Effect.gen(function* () {
    const service = yield* TestService.TestService
    const account = yield* signUp(service.baseUrl)
    const created = yield* api("POST", "/v1/sessions", {
      key: account.key,
      body: { session_type: "sandbox" }
    })
    assert.strictEqual(created.status, 201, created.text)
    const session = yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)
    return { service, account, id: session.id as string, key: account.key }
  })

  const exec = (key: string, id: string, command: string) =>
    Effect.map(
      api("POST", `/v1/sessions/${id}/exec`, { key, body: { command } }),
      (response) => response.json
    )

  const upload = (baseUrl: string, key: string, id: string, path: string, bytes: Uint8Array) =>
    Effect.promise(async () => {
      const form = new FormData()
      form.append("path", path)
      form.append("file", new Blob([bytes]), "upload.bin")
      const response = await fetch(`${baseUrl}/v1/sessions/${id}/upload`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}` },
        body: form
      })
      return { status: response.status, json: (await response.json()) as any }
    })

  /** An upload whose file part is sent by halves: the second half when `finish` is called. */
  const slowUpload = (baseUrl: string, key: string, id: string, path: string) =>
    Effect.promise(async () => {
      const boundary = `rbs${Crypto.randomBytes(8).toString("hex")}`
      const head = Buffer.from(
        `--${boundary}\r\ncontent-disposition: form-data; name="path"\r\n\r\n${path}\r\n` +
          `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="f"\r\n` +
          "content-type: application/octet-stream\r\n\r\nfirst half,"
      )
      const tail = Buffer.from(` second half\r\n--${boundary}--\r\n`)
      const request = Http.request(`${baseUrl}/v1/sessions/${id}/upload`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": `multipart/form-data; boundary=${boundary}`
        }
      })
      const answer = new Promise<{ status: number; json: any }>((resolve, reject) => {
        request.once("response", (response) => {
          let text = ""
          response.on("data", (chunk) => (text += chunk))
          // A body that is no JSON (the service went, mid-answer) is the test's failure, not an uncaught one.
          response.once("end", () => {
            try {
              resolve({ status: response.statusCode ?? 0, json: JSON.parse(text) })
            } catch (error) {
              reject(error)
            }
          })
        })
        request.once("error", reject)
      })
      // Awaited later (or never, when the test failed before): its failure is not an unhandled one.
      answer.catch(() => undefined)
      let early: unknown
      answer.then(
        (answered) => (early = answered),
        (error) => (early = String(error))
      )
      request.write(head)
      request.flushHeaders()
      return {
        answer,
        /** What it was answered before its second half was sent, if it was. */
        early: () => early,
        finish: () => {
          request.end(tail)
          return answer
        }
      }
    })

  it.effect(
    "a session takes 4 uploads at once: a fifth is 429 too_many_uploads before its body is read",
    () =>
      Effect.gen(function* () {
        const { service, id, key } = yield* sandbox
        type Slow = {
          readonly early: () => unknown
          readonly finish: () => Promise<{ status: number; json: any }>
        }
        // Four slow uploads under way, and a whole upload as a probe refused. A probe can take a slot
        // before the fourth slow one reaches the node (that one is then refused, rightly): those that
        // got in are finished and it is tried again.
        let slow: Array<Slow> = []
        let probed: { status: number; json: any } | undefined
        let probes = 0
        for (let attempt = 0; attempt < 5 && probed === undefined; attempt++) {
          slow = []
          for (let i = 0; i < 4; i++) slow.push(yield* slowUpload(service.baseUrl, key, id, `up/${i}.txt`))
          const answer = yield* until(
            Effect.suspend(() =>
              upload(service.baseUrl, key, id, `up/probe-${probes++}.txt`, new Uint8Array([1]))
            ),
            // A slow one answered before its end is what to look at, not a wait of 10 s.
            (answer) => answer.status !== 200 || slow.some((each) => each.early() !== undefined),
            10_000
          )
          assert.include([200, 429], answer.status, JSON.stringify(answer.json))
          // An answer already on its way arrives.
          yield* Effect.sleep("200 millis")
          const early = slow.map((each) => each.early() as { status: number } | undefined)
          if (answer.status === 429 && early.every((each) => each === undefined)) {
            probed = answer
            break
          }
          // Only a probe's race may answer a slow one early, and only with the bound's refusal.
          for (const each of early)
            if (each !== undefined) assert.strictEqual(each.status, 429, JSON.stringify(each))
          for (const [index, each] of slow.entries())
            if (early[index] === undefined) yield* Effect.promise(() => each.finish())
        }
        assert.isDefined(probed, "the four slow uploads under way, a probe refused")
        assert.strictEqual(probed!.json.error.code, "too_many_uploads")
        // A fifth is refused before its body is read: it never sends its second half.
        const fifth = yield* slowUpload(service.baseUrl, key, id, "up/4.txt")
        const refused = yield* Effect.promise(() => fifth.answer)
        assert.strictEqual(refused.status, 429)
        assert.strictEqual(refused.json.error.code, "too_many_uploads")
        for (const each of slow) {
          const done = yield* Effect.promise(() => each.finish())
          assert.strictEqual(done.status, 200, JSON.stringify(done.json))
        }
        const after = yield* upload(service.baseUrl, key, id, "up/5.txt", new Uint8Array([1, 2, 3]))
        assert.strictEqual(after.status, 200, "room again once they ended")
        const listed = yield* exec(key, id, "cat /root/up/0.txt; echo; ls /root/up | grep -vc probe")
        assert.strictEqual(listed.stdout, "first half, second half\n5\n")
      })
  )

  it.effect("upload and download up to 16 MiB exactly, whole or not at all, inside the sandbox only", () =>
    Effect.gen(function* () {
      const { service, id, key } = yield* sandbox
      const limit = 16 * 1024 * 1024
      const full = Crypto.randomBytes(limit)
      const sent = yield* upload(service.baseUrl, key, id, "data/full.bin", full)
      assert.strictEqual(sent.status, 200, JSON.stringify(sent.json))
      assert.deepStrictEqual(sent.json, { path: "/root/data/full.bin", size: limit })
      const digest = yield* exec(key, id, "sha256sum /root/data/full.bin | cut -d' ' -f1")
      assert.strictEqual(digest.stdout.trim(), Crypto.createHash("sha256").update(full).digest("hex"))

      const back = yield* api("GET", `/v1/sessions/${id}/download?path=/root/data/full.bin`, { key })
      assert.strictEqual(back.status, 200)
      assert.strictEqual(back.headers.get("content-length"), String(limit))
      assert.isTrue(Buffer.from(back.bytes).equals(full), "the same bytes back")

      const over = yield* upload(service.baseUrl, key, id, "data/over.bin", Crypto.randomBytes(limit + 1))
      assert.strictEqual(over.status, 413)
      assert.strictEqual(over.json.error.code, "file_too_large")
      const none = yield* exec(key, id, "ls /root/data; ls -a /root/data | grep -c rbs-upload || true")
      assert.strictEqual(none.stdout, "full.bin\n0\n", "nothing half-written, no temporary left")
      yield* exec(key, id, "head -c 16777217 /dev/zero > /root/big.bin")
      const tooBig = yield* api("GET", `/v1/sessions/${id}/download?path=big.bin`, { key })
      assert.strictEqual(tooBig.status, 413)

      // Paths resolve in the sandbox: `..` past / is refused, a link resolves inside it.
      const escape = yield* upload(service.baseUrl, key, id, "../../../etc/x", new Uint8Array([1]))
      assert.strictEqual(escape.status, 400)
      assert.strictEqual(escape.json.error.message, "Invalid value for field: path.")
      const climb = yield* api("GET", `/v1/sessions/${id}/download?path=../../../../etc/passwd`, { key })
      assert.strictEqual(climb.status, 400)
      yield* exec(key, id, "ln -s /etc/hostname /root/link")
      const viaLink = yield* api("GET", `/v1/sessions/${id}/download?path=link`, { key })
      assert.strictEqual(viaLink.text, "sandbox\n", "the sandbox's own file, never the host's")
      const missing = yield* api("GET", `/v1/sessions/${id}/download?path=/no/such`, { key })
      assert.strictEqual(missing.status, 404)
      assert.strictEqual(missing.json.error.code, "file_not_found")
      const deep = `/${"d".repeat(200)}/${"e".repeat(200)}/${"f".repeat(200)}`
      const missingDeep = yield* api("GET", `/v1/sessions/${id}/download?path=${deep}`, { key })
      assert.strictEqual(missingDeep.status, 404, "a long path's reason is not cut off")
      const dir = yield* api("GET", `/v1/sessions/${id}/download?path=/etc`, { key })
      assert.strictEqual(dir.status, 400)
      // Refused by the sandbox in the middle of a transfer bigger than a socket holds: an answer, not a hang.
      const intoFile = yield* upload(service.baseUrl, key, id, "/etc/hostname/x", Crypto.randomBytes(4 << 20))
      assert.strictEqual(intoFile.status, 400, JSON.stringify(intoFile.json))
      assert.strictEqual(intoFile.json.error.code, "invalid_field")

      const browser = yield* api("POST", "/v1/sessions", { key, body: {} })
      const onBrowser = yield* upload(service.baseUrl, key, browser.json.id, "x", new Uint8Array([1]))
      assert.strictEqual(onBrowser.status, 409)
      assert.strictEqual(onBrowser.json.error.code, "session_type_mismatch")
      yield* api("DELETE", `/v1/sessions/${browser.json.id}`, { key })
    })
  )

  it.effect(
    "a PTY over WebSocket: a real terminal, keystrokes in, resize, several at once, closed on exit",
    () =>
      Effect.gen(function* () {
        const { service, id, key } = yield* sandbox
        const url = `${service.wsBase}/v1/sessions/${id}/pty?cols=100&rows=30`
        const first = yield* openPty(url, key)
        assert.deepStrictEqual(
          { type: first.messages[0].type, cols: first.messages[0].cols, rows: first.messages[0].rows },
          { type: "hello", cols: 100, rows: 30 }
        )
        first.socket.send("stty size; tty\r")
        yield* Effect.promise(() => first.waitFor("30 100"))
        yield* Effect.promise(() => first.waitFor("/dev/pts/"))

        const second = yield* openPty(`${service.wsBase}/v1/sessions/${id}/pty`, key)
        const resized = yield* api("POST", `/v1/sessions/${id}/resize`, {
          key,
          body: { cols: 120, rows: 40 }
        })
        assert.strictEqual(resized.status, 200, resized.text)
        second.socket.send(Buffer.from("stty size\r"))
        yield* Effect.promise(() => second.waitFor("40 120"))
        const leases = yield* api("GET", `/v1/sessions/${id}`, { key })
        assert.strictEqual(leases.json.active_connection_leases, 2, "each open PTY is a lease")
        const audited = yield* api("GET", "/v1/audit/events?action=pty.opened", { key })
        assert.deepStrictEqual(
          audited.json.data.map((event: any) => event.target.id),
          [id, id],
          "each shell opened is audited"
        )

        const badSize = yield* api("POST", `/v1/sessions/${id}/resize`, {
          key,
          body: { cols: 0, rows: 40 }
        })
        assert.strictEqual(badSize.status, 400)

        first.socket.send("exit 7\r")
        const ended = yield* Effect.promise(() => first.closed)
        assert.deepStrictEqual(ended, { code: 1000, reason: "exited" })
        assert.deepStrictEqual(first.messages[first.messages.length - 1], {
          type: "exit",
          exit_code: 7,
          signal: null
        })

        // Closing the socket ends its shell and everything it started.
        second.socket.send("sleep 1234 &\r")
        yield* Effect.promise(() => new Promise((done) => setTimeout(done, 300)))
        second.socket.close()
        yield* Effect.promise(() => second.closed)
        yield* Effect.promise(() => new Promise((done) => setTimeout(done, 300)))
        const left = yield* exec(key, id, "ps -eo args | grep -c '^sleep 1234' || true")
        assert.strictEqual(left.stdout.trim(), "0")

        // Refusals before the upgrade.
        assert.strictEqual(yield* refusal(url, {}), 401)
        const other = yield* signUp(service.baseUrl)
        assert.strictEqual(yield* refusal(url, { authorization: `Bearer ${other.key}` }), 404)
        const browser = yield* api("POST", "/v1/sessions", { key, body: {} })
        const browserPty = `${service.wsBase}/v1/sessions/${browser.json.id}/pty`
        assert.strictEqual(yield* refusal(browserPty, { authorization: `Bearer ${key}` }), 409)
        yield* api("DELETE", `/v1/sessions/${browser.json.id}`, { key })

        // The session's end closes a terminal with the reason.
        const third = yield* openPty(url, key)
        yield* api("DELETE", `/v1/sessions/${id}`, { key })
        assert.deepStrictEqual(yield* Effect.promise(() => third.closed), {
          code: 1000,
          reason: "session ended: client_delete"
        })
      })
  )

  it.effect(
    "the gateway: a dev server in the sandbox over HTTP and WebSocket, by key, cookie-free, or a signed link",
    () =>
      Effect.gen(function* () {
        const { service, account, id, key } = yield* sandbox
        yield* upload(service.baseUrl, key, id, "server.js", new TextEncoder().encode(SERVER))
        const started = yield* api("POST", `/v1/sessions/${id}/exec`, {
          key,
          body: { command: ["node", "/root/server.js"], background: true }
        })
        assert.strictEqual(started.status, 202, started.text)
        const base = `/s/${id}/8000`
        let hello = yield* api("GET", `${base}/`, { key })
        for (let i = 0; i < 50 && hello.status !== 200; i++) {
          yield* Effect.promise(() => new Promise((done) => setTimeout(done, 100)))
          hello = yield* api("GET", `${base}/`, { key })
        }
        assert.strictEqual(hello.status, 200, hello.text)
        assert.strictEqual(hello.text, "hello from /")
        assert.match(hello.headers.get("content-security-policy") ?? "", /^sandbox /)
        const sub = yield* api("GET", `${base}/a/b?c=d`, { key })
        assert.strictEqual(sub.text, "hello from /a/b?c=d")
        const slash = yield* Effect.promise(() =>
          fetch(`${service.baseUrl}${base}`, {
            redirect: "manual",
            headers: { authorization: `Bearer ${key}` }
          })
        )
        assert.strictEqual(slash.status, 308)
        assert.strictEqual(slash.headers.get("location"), `${base}/`)

        // The program never sees the caller's credentials, and its cookies stay on its own path.
        const seen = yield* api("GET", `${base}/headers`, {
          key,
          headers: { cookie: "service_session=secret; app=1", "x-custom": "yes" }
        })
        assert.notProperty(seen.json, "authorization")
        assert.strictEqual(seen.json.cookie, "app=1")
        assert.strictEqual(seen.json["x-custom"], "yes")
        // A key sent as `?token=` is the caller's credential, never the program's query; with a Bearer
        // header, a `token` of the program's own passes.
        const byQuery = yield* api("GET", `${base}/a?token=${key}&x=1`)
        assert.strictEqual(byQuery.text, "hello from /a?x=1")
        const programs = yield* api("GET", `${base}/a?token=its-own`, { key })
        assert.strictEqual(programs.text, "hello from /a?token=its-own")
        const cookies = yield* api("GET", `${base}/cookies`, { key })
        const setCookie = cookies.headers.getSetCookie()
        assert.deepStrictEqual(setCookie, [
          `app=2; Path=/s/${id}/8000/; HttpOnly`,
          `app_service_session=evil; Path=/s/${id}/8000/`
        ])
        const echoed = yield* api("POST", `${base}/echo`, {
          key,
          rawBody: "posted body",
          contentType: "text/plain"
        })
        assert.strictEqual(echoed.text, "echo:posted body")

        // A WebSocket through the gateway.
        const reply = yield* Effect.promise(
          () =>
            new Promise<string>((resolve, reject) => {
              const socket = new WebSocket(`${service.wsBase}${base}/ws`, {
                headers: { authorization: `Bearer ${key}` }
              })
              socket.once("open", () => socket.send("ping"))
              socket.once("message", (data) => {
                resolve(data.toString())
                socket.terminate()
              })
              socket.once("error", reject)
            })
        )
        assert.strictEqual(reply, "ping")

        // A signed link: no key, a cookie for the gateway path, the token out of the URL.
        const minted = yield* api("POST", `/v1/sessions/${id}/gateway-token`, { key, body: { port: 8000 } })
        assert.strictEqual(minted.status, 200, minted.text)
        const linked = yield* Effect.promise(() => fetch(minted.json.url, { redirect: "manual" }))
        assert.strictEqual(linked.status, 303)
        assert.strictEqual(linked.headers.get("location"), `${base}/`)
        const cookie = (linked.headers.get("set-cookie") ?? "").split(";")[0]!
        assert.match(cookie, /^rbs_gateway=/)
        const withCookie = yield* api("GET", `${base}/`, { headers: { cookie } })
        assert.strictEqual(withCookie.text, "hello from /")
        assert.strictEqual(
          (yield* api("GET", `${base}/headers`, { headers: { cookie } })).json.cookie,
          undefined
        )

        // Refusals.
        assert.strictEqual((yield* api("GET", `${base}/`)).status, 401)
        const other = yield* signUp(service.baseUrl)
        assert.strictEqual((yield* api("GET", `${base}/`, { key: other.key })).status, 404)
        const closedPort = yield* api("GET", `/s/${id}/8001/`, { key })
        assert.strictEqual(closedPort.status, 502)
        assert.strictEqual(closedPort.json.error.code, "port_not_listening")
        assert.strictEqual((yield* api("GET", `/s/${id}/99999/`, { key })).status, 400)
        const noPort = yield* api("POST", `/v1/sessions/${id}/gateway-token`, { key, body: {} })
        assert.strictEqual(noPort.status, 400)

        // A key or link of `sessions.read` reads: GET and HEAD; a POST or a WebSocket is `sessions.write`'s.
        const reader = (yield* api("POST", "/v1/keys", {
          cookie: account.cookie,
          body: { name: "reader", scopes: ["sessions.read"] }
        })).json.secret as string
        assert.strictEqual((yield* api("GET", `${base}/`, { key: reader })).text, "hello from /")
        assert.strictEqual((yield* api("HEAD", `${base}/`, { key: reader })).status, 200)
        const readerPost = yield* api("POST", `${base}/echo`, {
          key: reader,
          rawBody: "x",
          contentType: "text/plain"
        })
        assert.strictEqual(readerPost.status, 403, readerPost.text)
        assert.strictEqual(readerPost.json.error.code, "forbidden")
        assert.strictEqual(
          yield* refusal(`${service.wsBase}${base}/ws`, { authorization: `Bearer ${reader}` }),
          403
        )
        const readLink = yield* api("POST", `/v1/sessions/${id}/gateway-token`, {
          key: reader,
          body: { port: 8000 }
        })
        assert.strictEqual(readLink.status, 200, readLink.text)
        const readCookie = (
          (yield* Effect.promise(() => fetch(readLink.json.url, { redirect: "manual" }))).headers.get(
            "set-cookie"
          ) ?? ""
        ).split(";")[0]!
        assert.strictEqual((yield* api("GET", `${base}/`, { headers: { cookie: readCookie } })).status, 200)
        const linkPost = yield* api("POST", `${base}/echo`, {
          headers: { cookie: readCookie },
          rawBody: "x",
          contentType: "text/plain"
        })
        assert.strictEqual(linkPost.status, 403, linkPost.text)
        // The full key's link writes.
        const writePost = yield* api("POST", `${base}/echo`, {
          headers: { cookie },
          rawBody: "by link",
          contentType: "text/plain"
        })
        assert.strictEqual(writePost.text, "echo:by link")

        // What crossed the gateway is the session's egress.
        yield* Effect.promise(() => new Promise((done) => setTimeout(done, 1500)))
        const session = yield* api("GET", `/v1/sessions/${id}`, { key })
        assert.isAbove(session.json.bytes_up, 100)
        assert.isAbove(session.json.bytes_down, 100)
      })
  )

  it.effect(
    "the dashboard's cookie opens a PTY of its active account (named in ?account=), from the service's own pages only",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const alice = yield* signUp(service.baseUrl)
        const org = yield* api("POST", "/v1/accounts/organizations", {
          cookie: alice.cookie,
          body: { name: `org-${Crypto.randomBytes(4).toString("hex")}` }
        })
        assert.strictEqual(org.status, 200, org.text)
        // The organization's own balance, topped up as its owner would (the local checkout's one button).
        const asOrg = { cookie: alice.cookie, headers: { "x-service-account": org.json.account.id } }
        const topup = yield* api("POST", "/v1/billing/topup", { ...asOrg, body: { amount_usd: 25 } })
        assert.strictEqual(topup.status, 200, topup.text)
        const page = yield* api("GET", new URL(topup.json.checkout_url).pathname, asOrg)
        const action = /<form method="post" action="([^"]+)"/.exec(page.text)![1]!
        const paid = yield* api("POST", action, {
          ...asOrg,
          rawBody: "",
          contentType: "application/x-www-form-urlencoded"
        })
        assert.isBelow(paid.status, 400, paid.text)
        const created = yield* api("POST", "/v1/sessions", {
          cookie: alice.cookie,
          headers: { "x-service-account": org.json.account.id },
          body: { session_type: "sandbox" }
        })
        assert.strictEqual(created.status, 201, created.text)
        const pty = `${service.wsBase}/v1/sessions/${created.json.id}/pty`
        const own = { cookie: alice.cookie, origin: service.baseUrl }
        assert.strictEqual(yield* refusal(`${pty}?account=${org.json.account.id}`, own), 101)
        assert.strictEqual(yield* refusal(pty, own), 404, "not a session of her personal account")
        assert.strictEqual(
          yield* refusal(`${pty}?account=${org.json.account.id}`, {
            ...own,
            origin: "https://elsewhere.example"
          }),
          403,
          "another site's page cannot open it with her cookie"
        )
        const bob = yield* signUp(service.baseUrl)
        assert.strictEqual(
          yield* refusal(`${pty}?account=${org.json.account.id}`, {
            cookie: bob.cookie,
            origin: service.baseUrl
          }),
          404,
          "another's organization is not found, as with the header"
        )
        yield* api("DELETE", `/v1/sessions/${created.json.id}`, {
          cookie: alice.cookie,
          headers: { "x-service-account": org.json.account.id }
        })
      })
  )

  it.effect("self-test reports its checks for a sandbox and a browser", () =>
    Effect.gen(function* () {
      const { service, id, key } = yield* sandbox
      const report = yield* api("POST", `/v1/sessions/${id}/self-test`, { key })
      assert.strictEqual(report.status, 200, report.text)
      assert.deepStrictEqual(
        report.json.checks.map((check: any) => [check.name, check.ok]),
        [
          ["exec", true],
          ["disk", true],
          ["egress", true],
          ["network", true],
          ["limits", true]
        ],
        report.text
      )
      assert.isTrue(report.json.ok)
      const browser = yield* api("POST", "/v1/sessions", { key, body: {} })
      yield* waitForSession(service.baseUrl, key, browser.json.id, isReady)
      const browserReport = yield* api("POST", `/v1/sessions/${browser.json.id}/self-test`, { key })
      assert.deepStrictEqual(
        browserReport.json.checks.map((check: any) => [check.name, check.ok]),
        [
          ["cdp", true],
          ["render", true],
          ["egress", true]
        ],
        browserReport.text
      )
      const after = yield* api("GET", `/v1/sessions/${browser.json.id}`, { key })
      assert.strictEqual(after.json.bytes_up + after.json.bytes_down, 0, "the egress check moves no byte")
    })
  )

  it.effect("bulk terminate ends what was asked, of the account, once; the rest is skipped", () =>
    Effect.gen(function* () {
      const { service, id, key } = yield* sandbox
      const second = yield* api("POST", "/v1/sessions", { key, body: { session_type: "sandbox" } })
      const browser = yield* api("POST", "/v1/sessions", { key, body: {} })
      const other = yield* signUp(service.baseUrl)
      const foreign = yield* api("POST", "/v1/sessions", { key: other.key, body: {} })
      const bySandbox = yield* api("POST", "/v1/sessions/bulk-terminate", {
        key,
        body: { all: true, session_type: "sandbox" }
      })
      assert.strictEqual(bySandbox.status, 200, bySandbox.text)
      assert.sameMembers(bySandbox.json.terminated, [id, second.json.id])
      assert.strictEqual(bySandbox.json.ended_reason, "bulk_terminate")
      const ended = yield* api("GET", `/v1/sessions/${id}`, { key })
      assert.include(ended.json, { status: "closed", ended_reason: "bulk_terminate" })

      const named = yield* api("POST", "/v1/sessions/bulk-terminate", {
        key,
        body: { ids: [browser.json.id, foreign.json.id, id, "nope"] }
      })
      assert.deepStrictEqual(named.json.terminated, [browser.json.id])
      assert.sameMembers(named.json.skipped, [foreign.json.id, id, "nope"])
      const untouched = yield* api("GET", `/v1/sessions/${foreign.json.id}`, { key: other.key })
      assert.include(["creating", "ready"], untouched.json.status, "another account's session runs on")
      yield* api("DELETE", `/v1/sessions/${foreign.json.id}`, { key: other.key })

      for (const body of [{}, { all: true, ids: [id] }, { all: false }]) {
        const bad = yield* api("POST", "/v1/sessions/bulk-terminate", { key, body })
        assert.strictEqual(bad.status, 400, JSON.stringify(body))
      }
    })
  )
})
