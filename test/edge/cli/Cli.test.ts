import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { rbs, startService, stop } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"

describe("rbs", () => {
  it.live(
    "migrate, serve, then billing credit by email and by account id beside the service on its embedded database",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        const env = { DATA_DIR: dataDir, PORT: String(yield* TestService.freePort), BROWSER_POOL_SIZE: "0" }

        const migrated = yield* rbs(["migrate"], env)
        assert.strictEqual(migrated.code, 0, migrated.stderr)
        assert.match(migrated.stdout, /^Applied 0001_init, 0002_egress, /)
        assert.strictEqual((yield* rbs(["migrate"], env)).stdout.trim(), "The database is up to date.")

        const service = yield* startService(env, ["bin/rbs.mjs", "serve"])
        const account = yield* signUp(service.baseUrl)
        const postmaster = Number(
          (yield* Effect.promise(() =>
            Fs.readFile(Path.join(dataDir, "postgres", "data", "postmaster.pid"), "utf8")
          )).split("\n")[0]
        )

        const byEmail = yield* rbs(
          ["billing", "credit", "--account", account.email, "--usd", "12.5", "--reason", "welcome"],
          env
        )
        assert.strictEqual(byEmail.code, 0, byEmail.stderr)
        assert.match(
          byEmail.stdout,
          /^Credited 12\.500000 USD to account [0-9a-f-]{36}\. Balance: 12\.500000 USD\.$/m
        )
        assert.isTrue(TestService.isAlive(postmaster), "the service's Postgres is still running")
        const accountId = /account ([0-9a-f-]{36})/.exec(byEmail.stdout)![1]!

        const byId = yield* rbs(
          ["billing", "credit", "--account", accountId, "--usd", "0.000001", "--reason", "x"],
          env
        )
        assert.strictEqual(byId.code, 0, byId.stderr)
        assert.include(byId.stdout, "Balance: 12.500001 USD.")

        const summary = (yield* request(service.baseUrl, "GET", "/v1/billing/summary", { key: account.key }))
          .json
        assert.strictEqual(summary.balance_micro_usd, 12_500_001)
        assert.deepStrictEqual(
          summary.recent_entries.map((entry: any) => [entry.kind, entry.amount_micro_usd, entry.description]),
          [
            ["grant", 1, "x"],
            ["grant", 12_500_000, "welcome"]
          ]
        )
        const created = yield* request(service.baseUrl, "POST", "/v1/sessions", {
          key: account.key,
          body: {}
        })
        assert.strictEqual(created.status, 201, "the credit admits sessions")
        yield* waitForSession(service.baseUrl, account.key, created.json.id, isReady)

        // A second service on the same data dir stops before touching the first one's sessions.
        const second = yield* rbs(["serve"], { ...env, PORT: String(yield* TestService.freePort) })
        assert.notStrictEqual(second.code, 0)
        assert.include(
          second.stderr + second.stdout,
          `Another service (pid ${service.child.pid}) is running from`
        )
        const still = yield* request(service.baseUrl, "GET", `/v1/sessions/${created.json.id}`, {
          key: account.key
        })
        assert.strictEqual(still.json.status, "ready", "the first service's session is untouched")

        for (const [args, message] of [
          [
            ["--account", "nobody@example.com", "--usd", "5", "--reason", "x"],
            "No account nobody@example.com."
          ],
          [["--account", accountId, "--usd", "0", "--reason", "x"], "--usd must be more than 0."],
          [["--account", accountId, "--usd", "5", "--reason", " "], "--reason must not be empty."]
        ] as const) {
          const refused = yield* rbs(["billing", "credit", ...args], env)
          assert.strictEqual(refused.code, 1, refused.stdout)
          assert.include(refused.stderr, message)
        }
        const badAmount = yield* rbs(
          ["billing", "credit", "--account", accountId, "--usd", "-5", "--reason", "x"],
          env
        )
        assert.notStrictEqual(badAmount.code, 0)
        assert.strictEqual(yield* stop(service.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    180_000
  )

  it.live(
    "doctor says which kinds of session this node can run and why not the others, and starts nothing",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        const env = { DATA_DIR: dataDir, SANDBOX_IMAGES_DIR: TestService.IMAGES_DIR }

        const all = yield* rbs(["doctor"], env)
        assert.strictEqual(all.code, 0, all.stderr)
        assert.strictEqual(all.stdout, "browser  runs here\ncontext  runs here\nsandbox  runs here\n")

        const some = yield* rbs(["doctor"], { ...env, RUNC_PATH: "/nonexistent/runc", MAX_CONTEXTS: "0" })
        assert.strictEqual(some.code, 0, some.stderr)
        assert.strictEqual(
          some.stdout,
          [
            "browser  runs here",
            "context  does not run here: MAX_CONTEXTS is 0: set it above 0, or unset it, to run context sessions",
            "sandbox  does not run here: runc was not found at /nonexistent/runc: install it (Debian: apt-get install runc) or set RUNC_PATH",
            ""
          ].join("\n")
        )

        const none = yield* rbs(["doctor"], {
          ...env,
          CHROME_PATH: "/nonexistent/chromium",
          MAX_SANDBOXES: "0"
        })
        assert.strictEqual(none.code, 0, none.stderr)
        const noChromium =
          "no Chromium was found at /nonexistent/chromium: install it (Debian: apt-get install chromium) or set CHROME_PATH to a Chromium or Chrome executable"
        assert.strictEqual(
          none.stdout,
          [
            `browser  does not run here: ${noChromium}`,
            `context  does not run here: context sessions run in shared browsers, and this node runs none (${noChromium})`,
            "sandbox  does not run here: MAX_SANDBOXES is 0: set it above 0, or unset it, to run sandboxes",
            ""
          ].join("\n")
        )

        // As a user other than root: sandboxes need root, and it says so.
        const nobody = yield* Effect.promise(
          () =>
            new Promise<{ readonly code: number | null; readonly stdout: string }>((resolve) => {
              const child = ChildProcess.spawn(process.execPath, ["bin/rbs.mjs", "doctor"], {
                env: { ...process.env, LOG_LEVEL: "warn", ...env },
                stdio: ["ignore", "pipe", "inherit"],
                uid: 65534,
                gid: 65534
              })
              let stdout = ""
              child.stdout!.on("data", (chunk) => (stdout += chunk))
              child.once("exit", (code) => resolve({ code, stdout }))
            })
        )
        assert.strictEqual(nobody.code, 0)
        assert.include(
          nobody.stdout,
          "sandbox  does not run here: sandboxes need root (each gets a user namespace of its own) and the service runs as uid 65534: run it as root (see the sandboxes guide)\n"
        )

        // Where /proc is masked, as a container masks it: no cell can have a /proc of its own, and
        // browsers are refused with why (the cell's own probe), not launched to fail.
        const masked = yield* Effect.promise(
          () =>
            new Promise<{ readonly code: number | null; readonly stdout: string }>((resolve) => {
              const child = ChildProcess.spawn(
                "unshare",
                [
                  "-m",
                  "sh",
                  "-c",
                  'mount --make-rprivate / && mount --bind /dev/null /proc/timer_list && exec setpriv --reuid 65534 --regid 65534 --clear-groups "$0" bin/rbs.mjs doctor',
                  process.execPath
                ],
                { env: { ...process.env, LOG_LEVEL: "warn", ...env }, stdio: ["ignore", "pipe", "inherit"] }
              )
              let stdout = ""
              child.stdout!.on("data", (chunk) => (stdout += chunk))
              child.once("exit", (code) => resolve({ code, stdout }))
            })
        )
        assert.strictEqual(masked.code, 0)
        assert.include(
          masked.stdout,
          "browser  does not run here: browsers run in a cell of their own, and this machine refuses to make one (mount its own /proc and /sys: Operation not permitted)\n"
        )

        assert.deepStrictEqual(
          yield* Effect.promise(() => Fs.readdir(dataDir)),
          [],
          "no database, profile or image was made"
        )
      }).pipe(Effect.scoped),
    60_000
  )
})
