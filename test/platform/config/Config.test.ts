import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Option } from "effect"
import { parseHostPort } from "../../../src/platform/config/HostPort.ts"
import { fromEnv, makeServiceConfig } from "../../../src/platform/config/Config.ts"

describe("ServiceConfig", () => {
  it("reads host:port and [v6]:port, and nothing else", () => {
    assert.deepStrictEqual(parseHostPort("10.0.0.5:7001"), { host: "10.0.0.5", port: 7001 })
    assert.deepStrictEqual(parseHostPort("node-a.internal:7001"), { host: "node-a.internal", port: 7001 })
    assert.deepStrictEqual(parseHostPort("[fd00::1]:7001"), { host: "fd00::1", port: 7001 })
    for (const bad of ["", "node-a", ":7001", "node-a:", "node-a:0", "node-a:70000", "fd00::1:7001", "a b:1"])
      assert.isUndefined(parseHostPort(bad), bad)
  })

  it("stays a single runner named local on the embedded database", () => {
    const config = makeServiceConfig({ port: 9000 })
    assert.strictEqual(config.nodeId, "local")
    assert.isTrue(Option.isNone(config.runner))
    assert.strictEqual(config.nodeUrl, "http://127.0.0.1:9000")
  })

  it("bound to every address, gives clients URLs on loopback, not the wildcard", () => {
    for (const host of ["0.0.0.0", "::"]) {
      const config = makeServiceConfig({ host, port: 8080 })
      assert.strictEqual(config.publicUrl, "http://127.0.0.1:8080", host)
      assert.strictEqual(config.cdpBase, "ws://127.0.0.1:8080", host)
    }
    assert.strictEqual(makeServiceConfig({ host: "::1", port: 8080 }).publicUrl, "http://[::1]:8080")
    assert.strictEqual(
      makeServiceConfig({ host: "0.0.0.0", publicUrl: "https://rbs.example" }).publicUrl,
      "https://rbs.example"
    )
  })

  it("names one of several nodes after its runner address unless NODE_ID names it", () => {
    const runner = makeServiceConfig({
      port: 9000,
      databaseUrl: "postgres://db/rbs",
      runnerAddress: "10.0.0.5:7001",
      runnerListen: "0.0.0.0:7001"
    })
    assert.strictEqual(runner.nodeId, "10.0.0.5-7001")
    assert.deepStrictEqual(Option.getOrThrow(runner.runner), {
      address: { host: "10.0.0.5", port: 7001 },
      listen: { host: "0.0.0.0", port: 7001 },
      tls: undefined
    })
    assert.strictEqual(
      runner.nodeUrl,
      "http://10.0.0.5:9000",
      "other nodes reach its HTTP server on the runner's host"
    )
    const single = makeServiceConfig({ port: 9000, databaseUrl: "postgres://db/rbs" })
    assert.strictEqual(
      single.nodeId,
      "local",
      "one runner on an external database is still the single runner"
    )
    const named = makeServiceConfig({
      databaseUrl: "postgres://db/rbs",
      runnerAddress: "10.0.0.5:7001",
      nodeId: "eu-1"
    })
    assert.strictEqual(named.nodeId, "eu-1")
    assert.strictEqual(
      makeServiceConfig({ runnerAddress: "[fd00::1]:7001", nodeUrl: "http://node-a:8080/" }).nodeUrl,
      "http://node-a:8080"
    )
  })

  it("says which variable is malformed", () => {
    assert.throws(() => makeServiceConfig({ runnerAddress: "node-a" }), /RUNNER_ADDRESS must be host:port/)
    assert.throws(
      () => makeServiceConfig({ runnerAddress: "node-a:7001", runnerListen: "0.0.0.0" }),
      /RUNNER_LISTEN must be host:port/
    )
  })

  it.effect(
    "hashes passwords at OWASP's scrypt cost unless PASSWORD_SCRYPT_N names another power of two",
    () =>
      Effect.gen(function* () {
        assert.strictEqual(makeServiceConfig({}).passwordScryptN, 131072)
        assert.strictEqual(makeServiceConfig({ passwordScryptN: 1024 }).passwordScryptN, 1024)
        assert.throws(
          () => makeServiceConfig({ passwordScryptN: 3000 }),
          /PASSWORD_SCRYPT_N must be a power of two/
        )
        const read = (value: string) =>
          fromEnv.parse(ConfigProvider.fromEnv({ env: { PASSWORD_SCRYPT_N: value } })).pipe(Effect.exit)
        const ok = yield* read("4096")
        assert.isTrue(Exit.isSuccess(ok) && ok.value.passwordScryptN === 4096)
        for (const bad of ["1000", "512", "2097152", "abc", "-1024"]) {
          const exit = yield* read(bad)
          assert.isTrue(Exit.isFailure(exit), bad)
          assert.include(String(exit), "PASSWORD_SCRYPT_N", bad)
        }
      })
  )
})
