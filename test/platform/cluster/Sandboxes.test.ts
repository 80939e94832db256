import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Http from "node:http"
import WebSocket from "ws"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { ownerOf, placementSettled, startNode } from "../../support/Nodes.ts"
import * as Sandboxes from "../../support/Sandboxes.ts"
import { startService, stop } from "../../support/ServiceProcess.ts"
import * as Sse from "../../support/Sse.ts"
import * as TestService from "../../support/TestService.ts"

const upload = (baseUrl: string, key: string, id: string, path: string, bytes: Uint8Array) =>
  Effect.promise(async () => {
    const form = new FormData()
    form.append("path", path)
    form.append("file", new Blob([bytes]))
    const response = await fetch(`${baseUrl}/v1/sessions/${id}/upload`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
      body: form
    })
    return { status: response.status, json: (await response.json()) as any }
  })

/** A GET to `baseUrl` with another `Host` (a gateway origin), as a browser resolving it here would send. */
const hostRequest = (baseUrl: string, host: string, path: string, key: string) =>
  Effect.promise(
    () =>
      new Promise<{ status: number; body: string; csp: string | undefined }>((resolve, reject) => {
        const url = new URL(baseUrl)
        const outgoing = Http.request(
          {
            hostname: url.hostname,
            port: url.port,
            path,
            headers: { host, authorization: `Bearer ${key}` }
          },
          (response) => {
            let body = ""
            response.on("data", (chunk) => (body += chunk))
            response.once("end", () =>
              resolve({
                status: response.statusCode ?? 0,
                body,
                csp: response.headers["content-security-policy"] as string | undefined
              })
            )
          }
        )
        outgoing.once("error", reject)
        outgoing.end()
      })
  )

/** A terminal's output until it holds `text`. */
const ptyUntil = (url: string, key: string, input: string, text: string) =>
  Effect.promise(
    () =>
      new Promise<string>((resolve, reject) => {
        const socket = new WebSocket(url, { headers: { authorization: `Bearer ${key}` } })
        let output = ""
        const timer = setTimeout(() => reject(new Error(`no ${text} in ${output}`)), 15_000)
        socket.once("open", () => socket.send(input))
        socket.on("message", (data, binary) => {
          if (!binary) return
          output += data.toString()
          if (output.includes(text)) {
            clearTimeout(timer)
            socket.close()
            resolve(output)
          }
        })
        socket.once("unexpected-response", (_request, response) =>
          reject(new Error(`${response.statusCode}`))
        )
        socket.once("error", reject)
      })
  )

describe("sandboxes on several nodes", () => {
  it.live(
    "a sandbox is driven through a node that does not run it: exec, its stream, stdin, files, a PTY and the gateway",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* TestService.freshDatabase
        const env = { BROWSER_POOL_SIZE: "0", MAX_SANDBOXES: "2", GATEWAY_DOMAIN: "rbs.localhost" }
        const a = yield* startNode(databaseUrl, env)
        const b = yield* startNode(databaseUrl, env)
        yield* placementSettled(databaseUrl, [a, b])
        const account = yield* signUp(a.baseUrl)
        const key = account.key
        const created = yield* request(a.baseUrl, "POST", "/v1/sessions", {
          key,
          body: { session_type: "sandbox" }
        })
        assert.strictEqual(created.status, 201, created.text)
        const id = created.json.id as string
        yield* waitForSession(a.baseUrl, key, id, isReady)
        const owner = yield* ownerOf(databaseUrl, id)
        // Everything below goes through the node that does not run the sandbox.
        const other = owner.node_id === a.nodeId ? b : a
        const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
          request(other.baseUrl, method, path, { key, ...options })

        const exec = yield* api("POST", `/v1/sessions/${id}/exec`, {
          body: { command: "echo hello; exit 2" }
        })
        assert.strictEqual(exec.status, 200, exec.text)
        assert.include(exec.json, { stdout: "hello\n", exit_code: 2 })

        const background = yield* api("POST", `/v1/sessions/${id}/exec`, {
          body: { command: "read a; echo got $a; sleep 0.2; echo done", background: true }
        })
        assert.strictEqual(background.status, 202, background.text)
        const cid = background.json.id
        const stdin = yield* api("POST", `/v1/sessions/${id}/commands/${cid}/stdin`, {
          body: { data: "x\n" }
        })
        assert.strictEqual(stdin.status, 200, stdin.text)
        const url = `${other.baseUrl}/v1/sessions/${id}/commands/${cid}/stream`
        const first = yield* Sse.read(url, key, { until: (events) => events.length >= 1 })
        assert.strictEqual(JSON.parse(first.events[0]!.data).data, "got x\n")
        const rest = yield* Sse.read(url, key, { lastEventId: first.events[0]!.id })
        assert.deepStrictEqual(
          rest.events.map((event) => event.event),
          ["stdout", "exit"],
          "resumed after the first event, through the hop"
        )
        const listed = yield* api("GET", `/v1/sessions/${id}/commands`)
        assert.lengthOf(listed.json.data, 2)

        const bytes = new TextEncoder().encode("across the hop")
        const sent = yield* upload(other.baseUrl, key, id, "/tmp/f.txt", bytes)
        assert.strictEqual(sent.status, 200, JSON.stringify(sent.json))
        const got = yield* api("GET", `/v1/sessions/${id}/download?path=/tmp/f.txt`)
        assert.strictEqual(got.text, "across the hop")
        assert.strictEqual(got.headers.get("content-length"), String(bytes.length))

        // The files API: a call of the actor where the sandbox runs; a watch's changes through the hop.
        const watch = yield* api("POST", `/v1/sessions/${id}/files/watches`, { body: { path: "/tmp" } })
        assert.strictEqual(watch.status, 201, watch.text)
        const moved = yield* api("POST", `/v1/sessions/${id}/files/move`, {
          body: { from: "/tmp/f.txt", to: "/tmp/g.txt" }
        })
        assert.strictEqual(moved.status, 200, moved.text)
        const tmp = yield* api("GET", `/v1/sessions/${id}/files?path=/tmp`)
        assert.include(
          tmp.json.data.map((entry: { name: string }) => entry.name),
          "g.txt"
        )
        const changes = yield* Sse.read(
          `${other.baseUrl}/v1/sessions/${id}/files/watches/${watch.json.id}/events`,
          key,
          { until: (events) => events.length >= 1 }
        )
        assert.deepStrictEqual(
          [changes.events[0]!.event, JSON.parse(changes.events[0]!.data).to],
          ["move", "/tmp/g.txt"]
        )
        const back = yield* api("POST", `/v1/sessions/${id}/files/move`, {
          body: { from: "/tmp/g.txt", to: "/tmp/f.txt" }
        })
        assert.strictEqual(back.status, 200, "the gateway below serves it")

        const pty = yield* ptyUntil(
          `${other.baseUrl.replace("http", "ws")}/v1/sessions/${id}/pty`,
          key,
          "echo $((6*7))\r",
          "42"
        )
        assert.include(pty, "42")

        yield* api("POST", `/v1/sessions/${id}/exec`, {
          body: { command: "python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp", background: true }
        })
        let page = yield* api("GET", `/s/${id}/8000/f.txt`)
        for (let i = 0; i < 50 && page.status !== 200; i++) {
          yield* Effect.sleep("100 millis")
          page = yield* api("GET", `/s/${id}/8000/f.txt`)
        }
        assert.strictEqual(page.text, "across the hop", "the gateway through the hop")
        // The same port at its own origin, through the same hop.
        const port = new URL(other.baseUrl).port
        const atOrigin = yield* hostRequest(other.baseUrl, `8000-${id}.rbs.localhost:${port}`, "/f.txt", key)
        assert.deepStrictEqual(atOrigin, { status: 200, body: "across the hop", csp: undefined })

        const report = yield* api("POST", `/v1/sessions/${id}/self-test`)
        assert.isTrue(report.json.ok, report.text)

        const once = yield* api("POST", "/v1/exec", { body: { command: ["python3", "-c", "print(2**10)"] } })
        assert.strictEqual(once.status, 200, once.text)
        assert.strictEqual(once.json.stdout, "1024\n")
        const onceSession = yield* request(a.baseUrl, "GET", `/v1/sessions/${once.json.session_id}`, { key })
        assert.include(onceSession.json, {
          status: "closed",
          ended_reason: "client_delete",
          session_type: "sandbox"
        })

        assert.strictEqual((yield* api("DELETE", `/v1/sessions/${id}`)).status, 204)
        for (const node of [a, b]) assert.strictEqual(yield* stop(node.child, "SIGTERM"), 0)
        for (const node of [a, b]) {
          const left = yield* Sandboxes.leftovers(Sandboxes.hostOf(node.env.DATA_DIR))
          assert.deepStrictEqual(left, { containers: [], mounts: [], cgroups: [], dirs: [] })
        }
      }).pipe(Effect.scoped),
    180_000
  )

  it.live(
    "a service killed with SIGKILL leaves its sandboxes running; its next start removes them and closes their sessions",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        const env = {
          DATA_DIR: dataDir,
          DATABASE_URL: yield* TestService.freshDatabase,
          PORT: String(yield* TestService.freePort),
          BROWSER_POOL_SIZE: "0",
          SANDBOX_POOL_SIZE: "1",
          SIGNUP_CREDIT_USD: "5"
        }
        const host = Sandboxes.hostOf(dataDir)
        const first = yield* startService(env)
        const account = yield* signUp(first.baseUrl)
        const created = yield* request(first.baseUrl, "POST", "/v1/sessions", {
          key: account.key,
          body: { session_type: "sandbox" }
        })
        yield* waitForSession(first.baseUrl, account.key, created.json.id, isReady)
        yield* stop(first.child, "SIGKILL")
        const orphans = yield* Sandboxes.containers(host)
        assert.isAtLeast(orphans.length, 1, "a SIGKILLed service leaves its containers running")

        const second = yield* startService(env)
        const session = yield* request(second.baseUrl, "GET", `/v1/sessions/${created.json.id}`, {
          key: account.key
        })
        assert.include(session.json, { status: "closed", ended_reason: "server_restart" })
        const left = yield* Sandboxes.leftovers(host)
        assert.isTrue(
          orphans.every(
            (id) => !left.containers.includes(id) && !left.mounts.some((path) => path.includes(id))
          ),
          JSON.stringify({ orphans, left })
        )
        assert.strictEqual(yield* stop(second.child, "SIGTERM"), 0)
        assert.deepStrictEqual(yield* Sandboxes.leftovers(host), {
          containers: [],
          mounts: [],
          cgroups: [],
          dirs: []
        })
      }).pipe(Effect.scoped),
    120_000
  )
})
