import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Http from "node:http"
import { uniqueEmail } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

// What a sign-up script, a password guesser and a reverse proxy can do to the people of a service:
// sign-ups are limited per client address and for everyone together before any password is hashed,
// every hash waits in a bounded queue of its own, and behind a trusted proxy each client is its own
// address, for the login limits and the audit trail alike.

const password = "correct horse battery staple"

interface Answer {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly json: any
}

/** A JSON request from `localAddress` (another loopback address is another peer), with `headers`. */
const call = (
  baseUrl: string,
  method: string,
  path: string,
  options: {
    readonly body?: unknown
    readonly headers?: Record<string, string>
    readonly localAddress?: string
  } = {}
) =>
  Effect.promise(
    () =>
      new Promise<Answer>((resolve, reject) => {
        const body = options.body === undefined ? undefined : JSON.stringify(options.body)
        const outgoing = Http.request(
          `${baseUrl}${path}`,
          {
            method,
            agent: false,
            localAddress: options.localAddress ?? "127.0.0.1",
            headers: {
              ...options.headers,
              ...(body === undefined ? {} : { "content-type": "application/json" })
            }
          },
          (response) => {
            let text = ""
            response.setEncoding("utf8")
            response.on("data", (chunk: string) => (text += chunk))
            response.on("end", () => {
              let json: unknown
              try {
                json = JSON.parse(text)
              } catch {
                json = undefined
              }
              resolve({ status: response.statusCode ?? 0, headers: response.headers, json })
            })
          }
        )
        outgoing.on("error", reject)
        outgoing.end(body)
      })
  )

/** The proxy the service trusts: a peer at 127.0.0.2 that says whom it forwards for. */
const PROXY = "127.0.0.2"
const behindProxy = (client: string) => ({ localAddress: PROXY, headers: { "x-forwarded-for": client } })

layer(
  TestService.layer({
    // OWASP's cost, as a service runs by default: half a second of a core a hash.
    passwordScryptN: 2 ** 17,
    passwordHashWorkers: 1,
    trustedProxies: `${PROXY}/32`,
    limits: { registrationsPerIp: 10, registrationsPerMinute: 24 }
  }),
  { excludeTestServices: true, timeout: 120_000 }
)("sign-ups", (it) => {
  it.effect(
    "400 at once from one address: its budget is made, the rest are 429 unhashed, and a login still answers",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const existing = uniqueEmail()
        const first = yield* call(service.baseUrl, "POST", "/auth/register", {
          body: { email: existing, password },
          ...behindProxy("198.51.100.1")
        })
        assert.strictEqual(first.status, 201)
        const flood = Effect.all(
          Array.from({ length: 400 }, () =>
            call(service.baseUrl, "POST", "/auth/register", {
              body: { email: uniqueEmail(), password }
            })
          ),
          { concurrency: "unbounded" }
        )
        const [answers, login] = yield* Effect.all(
          [
            flood,
            Effect.andThen(
              Effect.sleep("200 millis"),
              call(service.baseUrl, "POST", "/auth/login", {
                body: { email: existing, password },
                ...behindProxy("198.51.100.1")
              })
            )
          ],
          { concurrency: "unbounded" }
        )
        const created = answers.filter((answer) => answer.status === 201)
        const refused = answers.filter((answer) => answer.status === 429)
        assert.strictEqual(created.length, 10, "the address's budget")
        assert.strictEqual(refused.length, 390)
        for (const answer of refused) {
          assert.strictEqual(answer.json.error.code, "rate_limited")
          assert.isAtLeast(Number(answer.headers["retry-after"]), 1)
          assert.strictEqual(answer.headers["x-ratelimit-scope"], "principal")
        }
        assert.strictEqual(login.status, 200, "the existing user still logs in")
      })
  )

  it.effect("sign-ups from many addresses share the service's budget, then are 429 with scope service", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      // This file's first test spent 11 of the 24 (its one address's 10, and the proxied one), in
      // this minute's window or the last: 40 more pass at most 13 + 24, whichever minute they meet.
      const answers = yield* Effect.all(
        Array.from({ length: 40 }, (_, index) =>
          call(service.baseUrl, "POST", "/auth/register", {
            body: { email: uniqueEmail(), password },
            ...behindProxy(`198.51.100.${index + 10}`)
          })
        ),
        { concurrency: 8 }
      )
      const created = answers.filter((answer) => answer.status === 201).length
      const refused = answers.filter((answer) => answer.status === 429)
      assert.isAtLeast(created, 13, "what the service's budget has left")
      assert.isAtMost(created, 37, "never more than the budget of the minutes they meet")
      assert.strictEqual(created + refused.length, 40)
      for (const answer of refused) assert.strictEqual(answer.headers["x-ratelimit-scope"], "service")
    })
  )

  it.effect("password checks wait in a bounded queue: past it the answer is 429 at once", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      // Sixty logins of unknown emails from sixty addresses: each address and email within its budget,
      // but one worker hashes at a time and sixteen wait.
      const answers = yield* Effect.all(
        Array.from({ length: 60 }, (_, index) =>
          call(service.baseUrl, "POST", "/auth/login", {
            body: { email: uniqueEmail(), password },
            ...behindProxy(`203.0.113.${index + 1}`)
          })
        ),
        { concurrency: "unbounded" }
      )
      const checked = answers.filter((answer) => answer.status === 401).length
      const busy = answers.filter((answer) => answer.status === 429)
      assert.isAtMost(checked, 17, "no more than the queue and the one under way")
      assert.isAtLeast(busy.length, 60 - 17)
      for (const answer of busy) {
        assert.strictEqual(answer.json.error.code, "rate_limited")
        assert.strictEqual(answer.headers["retry-after"], "1")
      }
    })
  )
})

layer(
  TestService.layer({
    trustedProxies: `${PROXY}/32`,
    limits: { loginAttemptsPerIp: 6, loginAttemptsPerEmail: 3, loginAttemptsPerAccount: 5 }
  }),
  { excludeTestServices: true }
)("behind a trusted proxy", (it) => {
  it.effect(
    "each client has its own login budget, one address cannot lock a user out, and a spoofed header is ignored",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const email = uniqueEmail()
        assert.strictEqual(
          (yield* call(service.baseUrl, "POST", "/auth/register", { body: { email, password } })).status,
          201
        )
        const login = (pass: string, from: { localAddress?: string; headers?: Record<string, string> }) =>
          call(service.baseUrl, "POST", "/auth/login", { body: { email, password: pass }, ...from })
        // A guesser behind the proxy spends their own budget at this email...
        for (let i = 0; i < 3; i++)
          assert.strictEqual((yield* login("wrong password!", behindProxy("192.0.2.66"))).status, 401)
        assert.strictEqual((yield* login(password, behindProxy("192.0.2.66"))).status, 429)
        // ...and the user, from their own address behind the same proxy, still logs in.
        const theirs = yield* login(password, behindProxy("192.0.2.10"))
        assert.strictEqual(theirs.status, 200)
        // The audit trail names the client, not the proxy.
        const cookie = String(theirs.headers["set-cookie"]).split(";")[0]!
        const audit = yield* call(service.baseUrl, "GET", "/v1/audit/events?action=user.logged_in", {
          headers: { cookie }
        })
        assert.strictEqual(audit.status, 200, JSON.stringify(audit.json))
        const ips = audit.json.data.map((entry: { ip: string }) => entry.ip)
        assert.include(ips, "192.0.2.10")
        assert.include(ips, "192.0.2.66")
        assert.notInclude(ips, PROXY)
        // Many addresses together still meet the email's own budget (5 a minute: 3 + 1 spent).
        assert.strictEqual((yield* login("wrong password!", behindProxy("192.0.2.11"))).status, 401)
        assert.strictEqual((yield* login(password, behindProxy("192.0.2.12"))).status, 429)
        // A peer that is not a trusted proxy is the client, whatever its header says: 127.0.0.1 spends
        // its own address's budget (6), not 192.0.2.13's.
        const spoofed = { localAddress: "127.0.0.1", headers: { "x-forwarded-for": "192.0.2.13" } }
        const other = uniqueEmail()
        for (let i = 0; i < 6; i++)
          yield* call(service.baseUrl, "POST", "/auth/login", {
            body: { email: `${i}${other}`, password },
            ...spoofed
          })
        const past = yield* call(service.baseUrl, "POST", "/auth/login", {
          body: { email: `x${other}`, password },
          headers: { "x-forwarded-for": "192.0.2.14" }
        })
        assert.strictEqual(past.status, 429, "the same peer, whatever it claims")
        assert.strictEqual(
          (yield* call(service.baseUrl, "POST", "/auth/login", {
            body: { email: `y${other}`, password },
            ...behindProxy("192.0.2.13")
          })).status,
          401,
          "the address it claimed is untouched"
        )
      })
  )
})
