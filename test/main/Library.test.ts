import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Option } from "effect"
import puppeteer from "puppeteer-core"
import * as Fs from "node:fs/promises"
import { findProcessesUsing } from "../../src/runtimes/browser/Chromium.ts"
import {
  Accounts,
  Billing,
  CreateSessionRequest,
  decodeInput,
  layerLibrary,
  SandboxCalls,
  Sessions,
  systemOwner,
  Users
} from "../../src/main/index.ts"
import { pngSize } from "../support/Client.ts"
import { IMAGES_DIR } from "../support/Images.ts"
import * as TestService from "../support/TestService.ts"

describe("embedded as a library", () => {
  it.live(
    "a host program without HTTP drives a session through Sessions",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        const config = {
          dataDir,
          databaseUrl: yield* TestService.freshDatabase,
          browserPoolSize: 1,
          sandbox: { imagesDir: IMAGES_DIR, poolSize: 0 },
          logLevel: "Error" as const
        }

        // The host's own program: no server, no env, just layers.
        const program = Effect.gen(function* () {
          const users = yield* Users
          const accounts = yield* Accounts
          const sessions = yield* Sessions
          const billing = yield* Billing
          const user = yield* users.register({ email: "host@example.com", password: "a long password" })
          // The host acts on the account itself: the `System` principal, no key behind it.
          const owner = systemOwner(yield* accounts.personalAccountId(user.id))
          const refused = yield* Effect.flip(sessions.create(owner, {}))
          assert.strictEqual(refused._tag, "PaymentRequired", "no balance, no session")
          yield* billing.credit({
            accountId: owner.accountId,
            amount: 5_000_000n,
            kind: "grant",
            description: "host"
          })

          const created = yield* sessions.create(owner, { ttl_seconds: 300 })
          assert.strictEqual(created.status, "creating")
          // The host dials the browser itself: `connect` waits for ready and holds a lease meanwhile.
          const title = yield* Effect.scoped(
            Effect.gen(function* () {
              const connection = yield* sessions.connect(owner, created.id, "cdp")
              const leased = yield* sessions.get(owner, created.id)
              assert.strictEqual(leased.status, "ready")
              assert.strictEqual(leased.active_connection_leases, 1)
              const browser = yield* Effect.promise(() =>
                puppeteer.connect({ browserWSEndpoint: connection.runtime.cdp.endpoint })
              )
              const [tab] = yield* Effect.promise(() => browser.pages())
              yield* Effect.promise(() => tab!.goto("data:text/html,<title>hosted</title>"))
              const title = yield* Effect.promise(() => tab!.title())
              yield* Effect.promise(() => browser.disconnect())
              return title
            })
          )
          assert.strictEqual(title, "hosted")
          assert.strictEqual((yield* sessions.get(owner, created.id)).active_connection_leases, 0)
          const png = yield* sessions.screenshot(owner, created.id)
          assert.deepStrictEqual(pngSize(png), { width: 1280, height: 720 })
          const page = yield* sessions.list(owner, {})
          assert.deepStrictEqual(
            page.data.map((s) => s.id),
            [created.id]
          )
          // The use cases take typed input: a host decodes what its own callers send, with the API's 400s.
          const tooShort = yield* Effect.flip(decodeInput(CreateSessionRequest)({ ttl_seconds: 5 }))
          assert.strictEqual(tooShort._tag, "InvalidField")
          assert.strictEqual(tooShort.message, "Invalid value for field: ttl_seconds.")
          yield* sessions.close(owner, created.id)
          const closed = yield* sessions.get(owner, created.id)
          assert.strictEqual(closed.ended_reason, "client_delete")
          const again = yield* Effect.flip(sessions.close(owner, created.id))
          assert.strictEqual(again._tag, "SessionNotOpen")
          const other = yield* Effect.flip(sessions.get(systemOwner(owner.accountId), "sess_x"))
          assert.strictEqual(other._tag, "SessionNotFound")

          // A sandbox, driven through its supervisor without HTTP.
          const sandbox = yield* sessions.create(owner, { session_type: "sandbox" })
          const ran = yield* Effect.scoped(
            Effect.gen(function* () {
              const connection = yield* sessions.connect(owner, sandbox.id, "sandbox")
              const chunks: Array<Buffer> = []
              const command = yield* connection.runtime.exec.commands.start(
                {
                  command: ["sh", "-c", "echo from $HOME; exit 3"],
                  cwd: "/root",
                  env: {},
                  background: false,
                  timeoutMs: undefined
                },
                (_stream, data) => chunks.push(data)
              )
              yield* command.done
              return {
                output: Buffer.concat(chunks).toString(),
                code: command.exitCode,
                runtime: connection.runtime
              }
            })
          )
          assert.deepStrictEqual({ output: ran.output, code: ran.code }, { output: "from /root\n", code: 3 })

          // The same sandbox through its calls, as the API's routes and the MCP tools make them: the
          // session's actor answers each where the sandbox runs, with no HTTP anywhere.
          const calls = yield* SandboxCalls
          const foreground = yield* calls.exec(owner, sandbox.id, { command: "echo hosted; exit 4" })
          assert.isFalse(foreground.background)
          if (!foreground.background) {
            assert.strictEqual(foreground.result.stdout, "hosted\n")
            assert.strictEqual(foreground.result.exit_code, 4)
            assert.strictEqual(foreground.result.session_id, sandbox.id)
          }
          const piping = yield* calls.exec(owner, sandbox.id, {
            command: "cat > /root/piped",
            background: true
          })
          assert.isTrue(piping.background)
          const commandId = piping.background ? piping.info.id : ""
          assert.deepStrictEqual(
            yield* calls.stdin(owner, sandbox.id, commandId, { data: "through stdin", eof: true }),
            { written: 13, eof: true }
          )
          const listed = yield* calls.commands(owner, sandbox.id)
          // Newest first: the one writing its stdin, the foreground one, the one started on the connection.
          assert.deepStrictEqual(
            listed.data.slice(0, 2).map((command) => command.id),
            [commandId, foreground.background ? "" : foreground.result.id]
          )
          assert.lengthOf(listed.data, 3)
          const unknown = yield* Effect.flip(calls.command(owner, sandbox.id, "cmd_nope"))
          assert.strictEqual(unknown._tag, "CommandNotFound")
          const written = yield* calls.writeFile(
            owner,
            sandbox.id,
            "notes/a.txt",
            new TextEncoder().encode("kept")
          )
          assert.deepStrictEqual(written, { path: "/root/notes/a.txt", size: 4 })
          const file = yield* calls.readFile(owner, sandbox.id, "/root/notes/a.txt")
          assert.strictEqual(new TextDecoder().decode(file.content), "kept")
          const missing = yield* Effect.flip(calls.readFile(owner, sandbox.id, "/root/none"))
          assert.strictEqual(missing._tag, "FileNotFound")
          const notes = yield* calls.listFiles(owner, sandbox.id, "notes")
          assert.deepStrictEqual(
            notes.data.map((entry) => [entry.path, entry.type, entry.size]),
            [["/root/notes/a.txt", "file", 4]]
          )
          const taken = yield* Effect.flip(calls.makeDirectory(owner, sandbox.id, { path: "notes" }))
          assert.strictEqual(taken._tag, "FileExists")
          const report = yield* calls.selfTest(owner, sandbox.id)
          assert.strictEqual(report.session_id, sandbox.id)
          const browserExec = yield* Effect.flip(calls.exec(owner, created.id, { command: "true" }))
          assert.strictEqual(browserExec._tag, "SessionNotOpen", "the browser session has ended")
          yield* sessions.close(owner, sandbox.id)
          const ended = yield* Effect.flip(calls.exec(owner, sandbox.id, { command: "true" }))
          assert.strictEqual(ended._tag, "SessionNotOpen")
          // One command in a sandbox of its own, ended with it.
          const once = yield* calls.run(owner, { command: ["sh", "-c", "echo once"] })
          assert.strictEqual(once.stdout, "once\n")
          assert.strictEqual((yield* sessions.get(owner, once.session_id)).ended_reason, "client_delete")
          // Once it has ended, what is asked of it fails, typed (not a defect), saying so.
          yield* Deferred.await(ran.runtime.exited)
          const shell = yield* Effect.flip(ran.runtime.pty.spawn({ argv: ["sh"] }, () => undefined))
          assert.deepStrictEqual([shell._tag, shell.message], ["SupervisorError", "the sandbox has ended"])
          const started = yield* Effect.flip(
            ran.runtime.exec.commands.start({
              command: "true",
              cwd: "/root",
              env: {},
              background: true,
              timeoutMs: undefined
            })
          )
          assert.deepStrictEqual(
            [started._tag, started.reason, started.message],
            ["StartFailed", "gone", "the sandbox has ended"]
          )
          const read = yield* Effect.flip(ran.runtime.exec.files.readFile("/etc/hostname"))
          assert.isTrue(read.sandboxEnded)
          return Option.some(created.id)
        })

        const result = yield* program.pipe(Effect.provide(layerLibrary(config)))
        assert.isTrue(Option.isSome(result))
        const profilesDir = TestService.profilesDirOf(dataDir)
        assert.deepStrictEqual(yield* Effect.promise(() => findProcessesUsing(profilesDir)), [])
        // Empty, or removed (a parent of its own outside the data dir goes once empty).
        assert.deepStrictEqual(yield* Effect.promise(() => Fs.readdir(profilesDir).catch(() => [])), [])
      }).pipe(Effect.scoped),
    120_000
  )
})
