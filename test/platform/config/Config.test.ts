import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { parseHostPort } from "../../../src/platform/config/HostPort.ts"
import { makeServiceConfig } from "../../../src/platform/config/Config.ts"

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
      listen: { host: "0.0.0.0", port: 7001 }
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
})
