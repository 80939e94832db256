import { assert, layer } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect, Option } from "effect"
import * as FsSync from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { createClient } from "../../../src/edge/client/client.ts"
import { InvalidField } from "../../../src/kernel/Errors.ts"
import type { SandboxResources } from "../../../src/kernel/SandboxResources.ts"
import { LiveSessions } from "../../../src/runtime/LiveSessions.ts"
import { sandboxesMemory } from "../../../src/runtimes/sandbox/SandboxHost.ts"
import { isReady, request, signUp, waitForSession } from "../../support/Client.ts"
import { until } from "../../support/Poll.ts"
import * as Sandboxes from "../../support/Sandboxes.ts"
import * as TestService from "../../support/TestService.ts"

const MiB = 2 ** 20

/** One warm sandbox of small defaults, and maxima twice them (four CPUs at most). */
layer(
  TestService.layer({
    browserPoolSize: 0,
    sandbox: {
      poolSize: 1,
      memoryMb: 256,
      maxTasks: 128,
      diskMb: 64,
      cpus: 1,
      maxCpus: 2,
      maxMemoryMb: 512,
      maxDiskMb: 128,
      maxPids: 256
    }
  }),
  { excludeTestServices: true }
)("resources per sandbox", (it) => {
  const api = (method: string, path: string, options?: Parameters<typeof request>[3]) =>
    Effect.flatMap(TestService.TestService, (service) => request(service.baseUrl, method, path, options))

  const create = (key: string, body: object) =>
    api("POST", "/v1/sessions", { key, body: { session_type: "sandbox", ...body } })

  const sandboxOf = (key: string, body: object = {}) =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const created = yield* create(key, body)
      assert.strictEqual(created.status, 201, created.text)
      return yield* waitForSession(service.baseUrl, key, created.json.id, isReady)
    })

  const run = (key: string, id: string, command: string | ReadonlyArray<string>) =>
    Effect.map(api("POST", `/v1/sessions/${id}/exec`, { key, body: { command } }), (r) => r.json)

  const host = Effect.map(TestService.TestService, (service) => Sandboxes.hostOf(service.config.dataDir))

  /** The container of a sandbox session live on this node. */
  const containerOf = (id: string) =>
    Effect.gen(function* () {
      const { pid } = Option.getOrThrow((yield* LiveSessions).get(id)).runtime
      return yield* Sandboxes.containerOf(yield* host, pid)
    })

  /** The pool's warm sandbox: the one container none of the `live` sessions holds (once the ended ones' are gone). */
  const warmOne = (live: ReadonlyArray<string> = []) =>
    Effect.gen(function* () {
      const held = new Set<string>()
      for (const id of live) held.add(yield* containerOf(id))
      const idle = yield* until(
        Effect.map(Sandboxes.running(yield* host), (ids) => ids.filter((id) => !held.has(id))),
        (ids) => ids.length === 1,
        // An ended session's container goes as its teardown runs: slow on a machine busy with other suites.
        90_000
      )
      return idle[0]!
    })

  /** A cgroup file of a container, in one hierarchy (the sandboxes' parent is under the memory one's path). */
  const cgroup = (container: string, hierarchy: string, file: string) =>
    Effect.map(host, (found) => {
      const parent = Path.relative("/sys/fs/cgroup/memory", found.cgroupDirs[0]!)
      return FsSync.readFileSync(
        Path.join("/sys/fs/cgroup", hierarchy, parent, container, file),
        "utf8"
      ).trim()
    })

  it.effect("past a maximum, below a minimum or on a browser: 400 invalid_field naming the field", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const { key } = yield* signUp(service.baseUrl)
      for (const [resources, field] of [
        [{ memory_mb: 513 }, "resources.memory_mb"],
        [{ memory_mb: 63 }, "resources.memory_mb"],
        [{ cpus: 2.5 }, "resources.cpus"],
        [{ cpus: 0.05 }, "resources.cpus"],
        [{ disk_mb: 129 }, "resources.disk_mb"],
        [{ disk_mb: 8 }, "resources.disk_mb"],
        [{ pids: 257 }, "resources.pids"],
        [{ pids: 4 }, "resources.pids"],
        [{ memory_mb: 128, pids: 1000 }, "resources.pids"],
        [{ memory_mb: "lots" }, "resources"],
        [{ memory_mb: 128.5 }, "resources"],
        [{ gpus: 1 }, "resources"]
      ] as const) {
        const refused = yield* create(key, { resources })
        assert.strictEqual(refused.status, 400, `${JSON.stringify(resources)}: ${refused.text}`)
        assert.strictEqual(refused.json.error.code, "invalid_field")
        assert.strictEqual(refused.json.error.message, `Invalid value for field: ${field}.`)
      }
      for (const body of [
        { resources: { memory_mb: 512 } },
        { session_type: "browser", isolation: "context", resources: {} }
      ]) {
        const browser = yield* api("POST", "/v1/sessions", {
          key,
          body: { session_type: "browser", ...body }
        })
        assert.strictEqual(browser.status, 400, browser.text)
        assert.strictEqual(browser.json.error.message, "Invalid value for field: resources.")
      }
      const sessions = (yield* api("GET", "/v1/sessions", { key })).json
      assert.deepStrictEqual(sessions.data, [], "nothing refused was created")
    })
  )

  it.effect(
    "a warm sandbox given other CPUs, memory and processes: runc update at the hand-over, enforced and shown",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)

        const plain = yield* sandboxOf(key)
        assert.deepStrictEqual(plain.resources, { cpus: 1, memory_mb: 256, disk_mb: 64, pids: 128 })
        assert.strictEqual(plain.device, "sandbox debian, 1 CPU, 256 MB")

        const warm = yield* warmOne([plain.id])
        const session = yield* sandboxOf(key, { resources: { cpus: 0.5, memory_mb: 128, pids: 48 } })
        const id = session.id as string
        const container = yield* containerOf(id)
        assert.strictEqual(container, warm, "the pool's warm sandbox, not a launch")
        assert.deepStrictEqual(session.resources, { cpus: 0.5, memory_mb: 128, disk_mb: 64, pids: 48 })
        assert.strictEqual(session.device, "sandbox debian, 0.5 CPU, 128 MB")

        // Its cgroup holds the session's limits.
        assert.strictEqual(Number(yield* cgroup(container, "memory", "memory.limit_in_bytes")), 128 * MiB)
        assert.strictEqual(yield* cgroup(container, "pids", "pids.max"), "48")
        assert.strictEqual(yield* cgroup(container, "cpu", "cpu.cfs_quota_us"), "50000")
        assert.strictEqual(yield* cgroup(container, "cpu", "cpu.cfs_period_us"), "100000")
        const selfTest = (yield* api("POST", `/v1/sessions/${id}/self-test`, { key })).json
        const limits = selfTest.checks.find((check: any) => check.name === "limits")
        assert.isTrue(limits.ok, JSON.stringify(limits))

        // CPU: two busy loops for a second get half a CPU of time together (two cores without the
        // quota). A busy machine gives them less, never more.
        const usage = Effect.map(cgroup(container, "cpuacct", "cpuacct.usage"), Number)
        const usedBefore = yield* usage
        const spun = yield* run(
          key,
          id,
          "timeout 1 sh -c 'while :; do :; done' & timeout 1 sh -c 'while :; do :; done'; wait; echo done"
        )
        assert.strictEqual(spun.stdout, "done\n")
        const used = ((yield* usage) - usedBefore) / 1e9
        assert.isBelow(used, 0.65, `${used} s of CPU in about a second`)

        // Memory: over its bound the kernel kills the program, and says it was for memory; under, it lives.
        const hog = yield* run(key, id, ["python3", "-c", "b = bytearray(200 * 1024 * 1024); print('never')"])
        assert.strictEqual(hog.signal, "SIGKILL", JSON.stringify(hog))
        assert.isTrue(hog.oom_killed, JSON.stringify(hog))
        const small = yield* run(key, id, ["python3", "-c", "b = bytearray(40 * 1024 * 1024); print('fits')"])
        assert.strictEqual(small.stdout, "fits\n", JSON.stringify(small))
        assert.isFalse(small.oom_killed)
        const shellHog = yield* run(key, id, "python3 -c 'b = bytearray(200 * 1024 * 1024)'; echo exit=$?")
        assert.strictEqual(shellHog.stdout, "exit=137\n", "a shell's child killed, the shell lives on")
        assert.isFalse(shellHog.oom_killed, "the command itself was not killed")
        const killed = (yield* api("GET", `/v1/sessions/${id}/commands/${hog.id}`, { key })).json
        assert.isTrue(killed.oom_killed, "the command's record says so too")
        assert.strictEqual((yield* run(key, id, "echo alive")).stdout, "alive\n", "the sandbox answers")
        // The neighbour of the default size is untouched: its own limit, still.
        assert.strictEqual((yield* run(key, plain.id, "echo fine")).stdout, "fine\n")
        const neighbour = yield* containerOf(plain.id)
        assert.strictEqual(Number(yield* cgroup(neighbour, "memory", "memory.limit_in_bytes")), 256 * MiB)

        // Processes: a fork loop stops at the bound (48, the supervisor and the loop's own among them).
        const forks = yield* run(key, id, [
          "python3",
          "-c",
          [
            "import os, time",
            "n = 0",
            "try:",
            "    while n < 500:",
            "        if os.fork() == 0:",
            "            time.sleep(2); os._exit(0)",
            "        n += 1",
            "except OSError as e:",
            "    print(n, e.errno)"
          ].join("\n")
        ])
        const [forked, errno] = forks.stdout.trim().split(" ").map(Number)
        assert.strictEqual(errno, 11, `EAGAIN at the bound: ${JSON.stringify(forks)}`)
        assert.isAtMost(forked!, 46)
        assert.isAtLeast(forked!, 40)

        // Shown on GET and in the list, and kept after the end.
        const listed = (yield* api("GET", "/v1/sessions", { key })).json.data
        assert.deepStrictEqual(listed.find((each: any) => each.id === id).resources, session.resources)
        assert.strictEqual((yield* api("DELETE", `/v1/sessions/${id}`, { key })).status, 204)
        const ended = (yield* api("GET", `/v1/sessions/${id}`, { key })).json
        assert.strictEqual(ended.status, "closed")
        assert.deepStrictEqual(ended.resources, session.resources)
        yield* api("DELETE", `/v1/sessions/${plain.id}`, { key })
      })
  )

  it.effect("through the typed client: resources given, shown typed, and refused with its error class", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const { key } = yield* signUp(service.baseUrl)
      const rbs = createClient({ baseUrl: service.baseUrl, apiKey: key })
      const created = yield* Effect.promise(() =>
        rbs.sessions.create({
          payload: { session_type: "sandbox", resources: { memory_mb: 320, pids: 200 } }
        })
      )
      const ready = yield* waitForSession(service.baseUrl, key, created.id, isReady)
      const got = yield* Effect.promise(() => rbs.sessions.get({ params: { id: created.id } }))
      const resources: SandboxResources | null = got.resources
      assert.deepStrictEqual(resources, { cpus: 1, memory_mb: 320, disk_mb: 64, pids: 200 })
      assert.strictEqual(ready.device, "sandbox debian, 1 CPU, 320 MB")
      const ran = yield* Effect.promise(() =>
        rbs.sandbox.exec({ params: { id: created.id }, payload: { command: "python3 -V" } })
      )
      // A foreground exec's answer has its output; a background one's (202) has not.
      assert.isTrue("stdout" in ran && /^Python 3/.test(ran.stdout), JSON.stringify(ran))
      assert.isFalse(ran.oom_killed)
      const refused = yield* Effect.promise(() =>
        rbs.sessions.create({ payload: { session_type: "sandbox", resources: { cpus: 3 } } }).then(
          () => undefined,
          (error: unknown) => error
        )
      )
      assert.instanceOf(refused, InvalidField)
      assert.strictEqual((refused as InvalidField).field, "resources.cpus")
      yield* Effect.promise(() => rbs.sessions.delete({ params: { id: created.id } }))
    })
  )

  it.effect("the MCP sessions_create tool takes resources", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const { key } = yield* signUp(service.baseUrl)
      const transport = new StreamableHTTPClientTransport(new URL("/v1/mcp", service.baseUrl), {
        requestInit: { headers: { authorization: `Bearer ${key}` } }
      })
      const client = new Client({ name: "rbs-test", version: "1.0.0" })
      yield* Effect.acquireRelease(
        Effect.promise(() => client.connect(transport)),
        () =>
          Effect.promise(() =>
            transport.terminateSession().then(
              () => client.close(),
              () => client.close()
            )
          )
      )
      const tools = yield* Effect.promise(() => client.listTools())
      const create = tools.tools.find((tool) => tool.name === "sessions_create")!
      assert.property(create.inputSchema.properties, "resources")
      const made: any = yield* Effect.promise(() =>
        client.callTool({
          name: "sessions_create",
          arguments: { session_type: "sandbox", resources: { memory_mb: 192, cpus: 0.5 } }
        })
      )
      assert.notStrictEqual(made.isError, true, JSON.stringify(made))
      assert.deepStrictEqual(made.structuredContent.resources, {
        cpus: 0.5,
        memory_mb: 192,
        disk_mb: 64,
        pids: 128
      })
      const refused: any = yield* Effect.promise(() =>
        client.callTool({ name: "sessions_create", arguments: { resources: { memory_mb: 192 } } })
      )
      assert.isTrue(refused.isError, "a browser session takes no resources")
      assert.include(JSON.stringify(refused.content), "resources")
      yield* api("DELETE", `/v1/sessions/${made.structuredContent.id}`, { key })
    }).pipe(Effect.scoped)
  )

  it.effect("POST /v1/exec takes resources for its throwaway sandbox", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const { key } = yield* signUp(service.baseUrl)
      const hog = yield* api("POST", "/v1/exec", {
        key,
        body: {
          command: ["python3", "-c", "b = bytearray(100 * 1024 * 1024); print('never')"],
          resources: { memory_mb: 64 }
        }
      })
      assert.strictEqual(hog.status, 200, hog.text)
      assert.strictEqual(hog.json.signal, "SIGKILL")
      assert.isTrue(hog.json.oom_killed, hog.text)
      const session = (yield* api("GET", `/v1/sessions/${hog.json.session_id}`, { key })).json
      assert.deepStrictEqual(session.resources, { cpus: 1, memory_mb: 64, disk_mb: 64, pids: 128 })
      const refused = yield* api("POST", "/v1/exec", {
        key,
        body: { command: "true", resources: { memory_mb: 100_000 } }
      })
      assert.strictEqual(refused.status, 400)
      assert.strictEqual(refused.json.error.message, "Invalid value for field: resources.memory_mb.")
    })
  )

  it.effect(
    "the sandboxes together are bounded below the machine's memory, whatever their own limits add up to",
    () =>
      Effect.gen(function* () {
        const parent = (yield* host).cgroupDirs[0]!
        const limit = Number(FsSync.readFileSync(Path.join(parent, "memory.limit_in_bytes"), "utf8"))
        const expected = sandboxesMemory(Os.totalmem())
        // The kernel keeps it in whole pages.
        assert.approximately(limit, expected, 4096)
        const memsw = Path.join(parent, "memory.memsw.limit_in_bytes")
        if (FsSync.existsSync(memsw))
          assert.approximately(Number(FsSync.readFileSync(memsw, "utf8")), expected, 4096)
      })
  )

  it.effect("another disk size is a sandbox launched for the session: writes past it get ENOSPC", () =>
    Effect.gen(function* () {
      const service = yield* TestService.TestService
      const { key } = yield* signUp(service.baseUrl)
      const warm = yield* warmOne()
      const session = yield* sandboxOf(key, { resources: { disk_mb: 32, memory_mb: 512 } })
      const id = session.id as string
      const container = yield* containerOf(id)
      assert.notStrictEqual(container, warm, "not the warm one: its disk has the default size")
      assert.include(yield* Sandboxes.running(yield* host), warm, "which stays warm for the next")
      assert.deepStrictEqual(session.resources, { cpus: 1, memory_mb: 512, disk_mb: 32, pids: 128 })
      assert.strictEqual(Number(yield* cgroup(container, "memory", "memory.limit_in_bytes")), 512 * MiB)

      const size = yield* run(key, id, "df -k --output=size / | tail -1")
      assert.approximately(Number(size.stdout.trim()), 32 * 1024, 4 * 1024, "its root is a 32 MB file system")
      const fill = yield* run(key, id, "dd if=/dev/zero of=/root/fill bs=1M count=48 2>&1; echo status=$?")
      assert.include(fill.stdout, "No space left on device")
      assert.notInclude(fill.stdout, "status=0")
      yield* api("DELETE", `/v1/sessions/${id}`, { key })
    })
  )

  it.effect(
    "a sandbox whose supervisor the kernel kills for memory ends memory_limit, alone: its neighbour and the service go on",
    () =>
      Effect.gen(function* () {
        const service = yield* TestService.TestService
        const { key } = yield* signUp(service.baseUrl)
        const neighbour = yield* sandboxOf(key)
        const session = yield* sandboxOf(key, { resources: { memory_mb: 128 } })
        const id = session.id as string
        // Root in the sandbox may raise its supervisor's OOM score (anyone may raise their own): then
        // the supervisor, scored as if it held the whole limit, outranks each of four 40 MB programs
        // (one hog of the whole limit would still outrank it by its own pages).
        const raised = yield* run(key, id, "echo 1000 > /proc/1/oom_score_adj && cat /proc/1/oom_score_adj")
        assert.strictEqual(raised.stdout, "1000\n", JSON.stringify(raised))
        yield* api("POST", `/v1/sessions/${id}/exec`, {
          key,
          body: {
            command: [
              "python3",
              "-c",
              "import os, time\nos.fork(); os.fork()\nb = bytearray(40 * 1024 * 1024)\ntime.sleep(30)"
            ],
            background: true
          }
        })
        const ended = yield* waitForSession(service.baseUrl, key, id, (s) => s.status !== "ready")
        assert.strictEqual(ended.status, "error")
        assert.strictEqual(ended.ended_reason, "memory_limit")
        assert.strictEqual(
          (yield* run(key, neighbour.id, "echo fine")).stdout,
          "fine\n",
          "the neighbour answers"
        )
        assert.strictEqual((yield* api("GET", "/readyz")).status, 200, "the service is fine")
        yield* api("DELETE", `/v1/sessions/${neighbour.id}`, { key })
      })
  )
})
