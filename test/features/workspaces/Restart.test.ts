import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import * as GitServer from "../../support/GitServer.ts"
import { startService, stop } from "../../support/ServiceProcess.ts"
import * as TestService from "../../support/TestService.ts"

const list = (dir: string) => Effect.promise(() => Fs.readdir(dir).catch(() => [] as Array<string>))

describe("workspaces across a service killed mid-job", () => {
  it.live(
    "a snapshot and a restore interrupted by SIGKILL lose nothing: the content is whole, the job done after the restart, no temp file left",
    () =>
      Effect.gen(function* () {
        const env = {
          DATA_DIR: yield* TestService.freshDataDir,
          DATABASE_URL: yield* TestService.freshDatabase,
          PORT: String(yield* TestService.freePort),
          BROWSER_POOL_SIZE: "0",
          SIGNUP_CREDIT_USD: "5"
        }
        let service = yield* startService(env)
        const { key } = yield* signUp(service.baseUrl)
        const api = (method: string, path: string, body?: unknown) =>
          request(service.baseUrl, method, path, { key, ...(body === undefined ? {} : { body }) })
        const ws = yield* api("POST", "/v1/workspaces", { name: "big", image: "debian" })
        assert.strictEqual(ws.status, 200, ws.text)
        /** Runs `command` in a session on the workspace, then ends it. */
        const exec = (command: string) =>
          Effect.gen(function* () {
            const made = yield* api("POST", "/v1/sessions", { workspace: "big" })
            assert.strictEqual(made.status, 201, made.text)
            yield* waitForSession(service.baseUrl, key, made.json.id, isReady, 60_000)
            const ran = yield* api("POST", `/v1/sessions/${made.json.id}/exec`, { command })
            yield* api("DELETE", `/v1/sessions/${made.json.id}`)
            yield* waitForSession(service.baseUrl, key, made.json.id, (s) => s.status === "closed")
            return ran.json.stdout as string
          })
        // Enough random bytes that archiving them takes a few seconds: a kill lands mid-way.
        yield* exec("head -c 150M /dev/urandom > ~/blob && echo one > ~/marker")
        const job = (body: unknown) =>
          Effect.gen(function* () {
            const created = yield* api("POST", "/v1/jobs", body)
            assert.strictEqual(created.status, 201, created.text)
            return created.json.id as string
          })
        const until = (id: string, done: (job: any) => boolean) =>
          Effect.gen(function* () {
            for (let i = 0; i < 1200; i++) {
              const got = (yield* api("GET", `/v1/jobs/${id}`)).json
              if (done(got)) return got
              yield* Effect.sleep("50 millis")
            }
            return assert.fail(`job ${id} never got there`)
          })
        /**
         * SIGKILL once the job holds the workspace (its status says so) and is into its work (its temp file
         * is there): on a fast disk the archive takes well under a second, so a fixed pause could land after it.
         */
        const killMidway = (status: string) =>
          Effect.gen(function* () {
            const tmp = Path.join(env.DATA_DIR, "tmp", "workspaces")
            let working = false
            for (let i = 0; i < 3000 && !working; i++) {
              working =
                (yield* list(tmp)).length > 0 &&
                (yield* api("GET", "/v1/workspaces/big")).json.status === status
              if (!working) yield* Effect.sleep("5 millis")
            }
            assert.isTrue(working, `the job never got into its work (${status})`)
            yield* stop(service.child, "SIGKILL")
            service = yield* startService(env)
          })

        const snapshot = yield* job({ kind: "snapshot", input: { workspace: "big", name: "s1" } })
        yield* killMidway("snapshotting")
        const snapped = yield* until(snapshot, (j) => j.state === "succeeded" || j.state === "failed")
        assert.strictEqual(snapped.state, "succeeded", JSON.stringify(snapped))
        const outcomes = snapped.attempt_log.map((a: any) => a.outcome)
        assert.deepStrictEqual(
          outcomes.filter((o: string) => o !== "deferred"),
          ["abandoned", "succeeded"],
          "the killed attempt is over, the next one made the snapshot"
        )
        const snapshots = (yield* api("GET", "/v1/workspaces/big/snapshots")).json.data
        assert.deepStrictEqual(
          snapshots.map((s: any) => s.name),
          ["s1"],
          "one snapshot, not a half one beside it"
        )

        yield* exec("echo two > ~/marker && rm ~/blob")
        const restore = yield* job({ kind: "restore", input: { workspace: "big", snapshot: "s1" } })
        yield* killMidway("restoring")
        const restored = yield* until(restore, (j) => j.state === "succeeded" || j.state === "failed")
        assert.strictEqual(restored.state, "succeeded", JSON.stringify(restored))
        assert.strictEqual(
          yield* exec("cat ~/marker && stat -c %s ~/blob"),
          `one\n${150 * 1024 * 1024}\n`,
          "the snapshot's content, whole"
        )

        // Nothing half-made stays on the disk.
        const wsDir = Path.join(env.DATA_DIR, "workspaces", ws.json.id)
        const entries = yield* list(wsDir)
        assert.strictEqual(entries.length, 2, `current and one generation: ${entries.join(", ")}`)
        assert.include(entries, "current")
        assert.deepStrictEqual(yield* list(Path.join(env.DATA_DIR, "tmp", "workspaces")), [])
        assert.deepStrictEqual(yield* list(Path.join(env.DATA_DIR, "tmp", "jobs")), [])
        assert.strictEqual(yield* stop(service.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    300_000
  )

  it.live(
    "an import interrupted by SIGKILL mid-clone is done after the restart, from a clean start, with nothing left over",
    () =>
      Effect.gen(function* () {
        const env = {
          DATA_DIR: yield* TestService.freshDataDir,
          DATABASE_URL: yield* TestService.freshDatabase,
          PORT: String(yield* TestService.freePort),
          BROWSER_POOL_SIZE: "0",
          SIGNUP_CREDIT_USD: "5",
          EGRESS_ALLOW_CIDRS: "127.0.0.1/32"
        }
        const hold = { held: true }
        const repo = yield* GitServer.serveWith({ hold })
        let service = yield* startService(env)
        const { key } = yield* signUp(service.baseUrl)
        const api = (method: string, path: string, body?: unknown) =>
          request(service.baseUrl, method, path, { key, ...(body === undefined ? {} : { body }) })
        // The import's request waits for the clone, which hangs at the code host: the service dies under it.
        const importing = yield* Effect.forkChild(api("POST", "/v1/workspaces/import", { url: repo.url }))
        for (let i = 0; i < 600 && repo.requests.length === 0; i++) yield* Effect.sleep("25 millis")
        assert.isNotEmpty(repo.requests, "git reached the code host")
        const [job] = (yield* api("GET", "/v1/jobs?kind=import")).json.data
        assert.strictEqual(job.state, "running")
        yield* stop(service.child, "SIGKILL")
        yield* Fiber.interrupt(importing)
        hold.held = false
        service = yield* startService(env)

        let done: any
        for (let i = 0; i < 1200; i++) {
          done = (yield* api("GET", `/v1/jobs/${job.id}`)).json
          if (done.state === "succeeded" || done.state === "failed") break
          yield* Effect.sleep("50 millis")
        }
        assert.strictEqual(done.state, "succeeded", JSON.stringify(done))
        assert.deepStrictEqual(
          done.attempt_log.map((a: any) => a.outcome).filter((o: string) => o !== "deferred"),
          ["abandoned", "succeeded"]
        )
        const workspace = (yield* api("GET", `/v1/workspaces/${done.result.workspace_id}`)).json
        assert.include(workspace, { name: "demo", status: "ready", github_repo: repo.url })
        const made = yield* api("POST", "/v1/sessions", { workspace: "demo" })
        yield* waitForSession(service.baseUrl, key, made.json.id, isReady, 60_000)
        const listing = yield* api("POST", `/v1/sessions/${made.json.id}/exec`, {
          command: "ls -A ~ && cat ~/README.md"
        })
        assert.strictEqual(
          listing.json.stdout,
          ".git\nREADME.md\nsrc\nv2\n",
          "the repository, and nothing of the killed attempt"
        )
        yield* api("DELETE", `/v1/sessions/${made.json.id}`)
        assert.deepStrictEqual(yield* list(Path.join(env.DATA_DIR, "tmp", "workspaces")), [])
        assert.deepStrictEqual(yield* list(Path.join(env.DATA_DIR, "tmp", "jobs")), [])
        assert.strictEqual(yield* stop(service.child, "SIGTERM"), 0)
      }).pipe(Effect.scoped),
    180_000
  )
})
