import { assert, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as Fs from "node:fs"
import { CONTROL_SOCKET_IN_SANDBOX, PROXY_PORT } from "../../../src/runtimes/sandbox/OciSpec.ts"
import { isReady, metricValue, request, signUp, waitForSession } from "../../support/Client.ts"
import * as TestService from "../../support/TestService.ts"

// A sandbox that opens every socket it can: each connection to its proxy is one to the service's
// egress socket for it, and each to its control socket one to the service, so without bounds the
// tenant spends the service's file descriptors (this process's: the service runs in it here).

/**
 * Twenty-five shells each opening 4,000 connections to the sandbox's proxy (100,000 in all) and
 * holding them for 5 s, and one process 2,000 to its control socket.
 */
const FLOOD = `for p in $(seq 25); do
  bash -c 'n=0; for i in $(seq 4000); do exec {fd}<>/dev/tcp/127.0.0.1/${PROXY_PORT} 2>/dev/null && n=$((n+1)) || break; done; echo proxy $n; sleep 5' &
done
node -e '
const net = require("net"); let open = 0; const held = []
for (let i = 0; i < 2000; i++) { const s = net.connect(${JSON.stringify(CONTROL_SOCKET_IN_SANDBOX)}); s.on("connect", () => open++); s.on("error", () => {}); held.push(s) }
setTimeout(() => { console.log("control " + open); process.exit(0) }, 5000)' &
wait`

const openFds = () => Fs.readdirSync("/proc/self/fd").length

layer(TestService.layer({ browserPoolSize: 0, sandbox: { poolSize: 0 } }), { excludeTestServices: true })(
  "a sandbox's sockets",
  (it) => {
    /** A ready sandbox session and a way to run a command in it. */
    const sandbox = Effect.gen(function* () {
      const service = yield* TestService.TestService
      const account = yield* signUp(service.baseUrl)
      const created = yield* request(service.baseUrl, "POST", "/v1/sessions", {
        key: account.key,
        body: { session_type: "sandbox" }
      })
      assert.strictEqual(created.status, 201, created.text)
      const id = created.json.id as string
      yield* waitForSession(service.baseUrl, account.key, id, isReady)
      const exec = (command: string | ReadonlyArray<string>, timeout_seconds = 60) =>
        request(service.baseUrl, "POST", `/v1/sessions/${id}/exec`, {
          key: account.key,
          body: { command, timeout_seconds }
        })
      return { service, exec }
    })

    it.effect(
      "100,000 from one sandbox are refused past its bounds; the service keeps its descriptors",
      () =>
        Effect.gen(function* () {
          const { service, exec } = yield* sandbox
          const before = openFds()
          let most = before
          let sampling = true
          const sampler = yield* Effect.forkChild(
            Effect.promise(async () => {
              while (sampling) {
                most = Math.max(most, openFds())
                await new Promise((resolve) => setTimeout(resolve, 100))
              }
            })
          )
          const flood = yield* exec(["bash", "-c", FLOOD], 120)
          sampling = false
          yield* Fiber.join(sampler)
          assert.strictEqual(flood.status, 200, flood.text)
          const lines = String(flood.json.stdout).trim().split("\n")
          assert.strictEqual(lines.length, 26, flood.json.stdout + flood.json.stderr)
          const opened = lines
            .filter((line) => line.startsWith("proxy "))
            .reduce((sum, line) => sum + Number(line.slice("proxy ".length)), 0)
          // Each shell stops at its own limit or when the sandbox's supervisor (at its own) takes no more.
          assert.isAbove(opened, 8192, "the shells opened far more sockets than the service holds for them")

          // The service held no more than the sandbox's bounds (its egress connections, its control
          // socket's spares) beside its own.
          assert.isBelow(most - before, 1024, `the service's descriptors went from ${before} to ${most}`)
          const metrics = (yield* request(service.baseUrl, "GET", "/metrics")).text
          assert.isAbove(metricValue(metrics, "rbs_egress_refused_total", 'reason="connections"'), 0)
          // The service is fine, and so is the sandbox once its processes are gone.
          assert.strictEqual((yield* request(service.baseUrl, "GET", "/healthz")).status, 200)
          const after = yield* exec("echo fine")
          assert.strictEqual(after.json.stdout, "fine\n", after.text)
        }),
      180_000
    )

    it.effect("each process of a sandbox opens at most SANDBOX_OPEN_FILES files", () =>
      Effect.gen(function* () {
        const { exec } = yield* sandbox
        const limits = yield* exec(["sh", "-c", "ulimit -Sn; ulimit -Hn"])
        assert.strictEqual(limits.json.stdout, "4096\n4096\n", limits.text)
      })
    )
  }
)
