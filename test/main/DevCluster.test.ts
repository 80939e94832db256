import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { findProcessesUsing, killGroup } from "../../src/runtimes/browser/Chromium.ts"
import { isReady, request, signUp, waitForSession } from "../support/Client.ts"
import { stop } from "../support/ServiceProcess.ts"
import * as TestService from "../support/TestService.ts"

describe("npm run cluster", () => {
  it.live(
    "starts one Postgres, a Redis and the nodes on them, which serve one another's sessions and share rate limits, and stops them all",
    () =>
      Effect.gen(function* () {
        const dataDir = yield* TestService.freshDataDir
        // The nodes take consecutive ports from the first.
        const [port, runnerPort, postgresPort, redisPort] = [
          yield* TestService.freePorts(2),
          yield* TestService.freePorts(2),
          yield* TestService.freePorts(1),
          yield* TestService.freePorts(1)
        ]
        const cluster = spawn(process.execPath, ["--experimental-strip-types", "src/main/cluster.ts"], {
          env: {
            ...process.env,
            CLUSTER_NODES: "2",
            PORT: String(port),
            RUNNER_PORT: String(runnerPort),
            POSTGRES_PORT: String(postgresPort),
            REDIS_PORT: String(redisPort),
            LIMIT_SESSION_CREATES_PER_MINUTE: "2",
            DATA_DIR: dataDir,
            LOG_LEVEL: "warn",
            BROWSER_POOL_SIZE: "1",
            SIGNUP_CREDIT_USD: "5"
          },
          stdio: ["ignore", "pipe", "pipe"]
        })
        // The nodes' logs (stdout) too, so a failure says what a node was doing.
        let output = ""
        cluster.stdout!.on("data", (chunk) => (output += chunk))
        cluster.stderr!.on("data", (chunk) => (output += chunk))
        // Even when the test fails half-way: a graceful stop first (the cluster stops its nodes and their
        // browsers), and no browser of a node left behind.
        yield* Effect.addFinalizer(() =>
          Effect.gen(function* () {
            yield* stop(cluster, "SIGTERM").pipe(
              Effect.timeout("30 seconds"),
              Effect.catch(() => stop(cluster, "SIGKILL"))
            )
            for (const node of ["node-1", "node-2"]) {
              const left = yield* Effect.promise(() =>
                findProcessesUsing(TestService.profilesDirOf(Path.join(dataDir, node)))
              )
              for (const pid of left) killGroup(pid)
            }
          })
        )
        const nodes = [`http://127.0.0.1:${port}`, `http://127.0.0.1:${port + 1}`]
        const deadline = Date.now() + 120_000
        while (!output.includes("2 nodes on one Postgres")) {
          if (cluster.exitCode !== null || Date.now() > deadline)
            return yield* Effect.die(new Error(`the cluster did not start: ${output}`))
          yield* Effect.sleep("200 millis")
        }
        const ready = yield* Effect.forEach(nodes, (node) => request(node, "GET", "/readyz"))
        assert.deepStrictEqual(
          ready.map((r) => r.json.node.id),
          ["node-1", "node-2"]
        )

        const account = yield* signUp(nodes[0]!)
        const created = yield* request(nodes[1]!, "POST", "/v1/sessions", { key: account.key, body: {} })
        assert.strictEqual(created.status, 201)
        const session = yield* waitForSession(nodes[0]!, account.key, created.json.id, isReady)
        assert.strictEqual(session.status, "ready")
        // The nodes share the cluster's Redis: two creates a minute for the account, on any node.
        const second = yield* request(nodes[0]!, "POST", "/v1/sessions", { key: account.key, body: {} })
        assert.strictEqual(second.status, 201)
        const third = yield* request(nodes[1]!, "POST", "/v1/sessions", { key: account.key, body: {} })
        assert.strictEqual(third.status, 429, JSON.stringify(third.json))

        // Ctrl-C (SIGINT) or SIGTERM: the nodes stop, then Postgres; nothing is left running.
        assert.strictEqual(yield* stop(cluster, "SIGTERM"), 0)
        for (const node of ["node-1", "node-2"]) {
          const left = yield* Effect.promise(() =>
            findProcessesUsing(TestService.profilesDirOf(Path.join(dataDir, node)))
          )
          assert.deepStrictEqual(left, [], `${node}'s browsers are gone`)
        }
        const postmaster = yield* Effect.promise(() =>
          Fs.readFile(Path.join(dataDir, "postgres", "data", "postmaster.pid"), "utf8").catch(() => "")
        )
        const postgresPid = Number(postmaster.split("\n")[0])
        assert.isFalse(postgresPid > 0 && TestService.isAlive(postgresPid), "Postgres stopped")
        const closed = yield* Effect.promise(() =>
          fetch(`${nodes[0]}/healthz`).then(
            () => false,
            () => true
          )
        )
        assert.isTrue(closed, "the nodes no longer listen")
        assert.isTrue(yield* Effect.promise(() => TestService.isFree(redisPort)), "Redis stopped")
      }).pipe(Effect.scoped),
    240_000
  )
})
