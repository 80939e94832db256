import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { ServiceConfig } from "../../../src/platform/config/Config.ts"
import { listenerAddress, listenerReaches, LocalPorts } from "../../../src/platform/net/LocalPorts.ts"

describe("LocalPorts", () => {
  it("matches a listener by the address it is bound to", () => {
    assert.isTrue(listenerReaches(listenerAddress("127.0.0.1"), "127.0.0.1"))
    assert.isFalse(listenerReaches(listenerAddress("127.0.0.1"), "127.0.0.2"))
    assert.isFalse(listenerReaches(listenerAddress("127.0.0.1"), "::1"))
    // The unspecified address connects to this machine: it reaches every listener.
    assert.isTrue(listenerReaches(listenerAddress("127.0.0.1"), "0.0.0.0"))
    assert.isTrue(listenerReaches(listenerAddress("::1"), "::"))
    for (const wildcard of ["0.0.0.0", "::", "[::]", "localhost"]) {
      assert.isTrue(listenerReaches(listenerAddress(wildcard), "127.0.0.2"), wildcard)
      assert.isTrue(listenerReaches(listenerAddress(wildcard), "192.0.2.10"), wildcard)
    }
    assert.isTrue(listenerReaches(listenerAddress("[::ffff:127.0.0.1]"), "127.0.0.1"))
  })

  it.effect("holds the service's listeners, each by the address it is bound to", () =>
    Effect.gen(function* () {
      const ports = yield* LocalPorts
      // The API listener is bound to 127.0.0.1 here; the local database URL names localhost.
      assert.isTrue(ports.reaches("127.0.0.1", 18080))
      assert.isFalse(ports.reaches("127.0.0.2", 18080))
      assert.isTrue(ports.reaches("127.0.0.2", 15432))
      assert.isTrue(ports.reaches("::1", 15432))
    }).pipe(
      Effect.provide(
        LocalPorts.layer.pipe(
          Layer.provide(
            ServiceConfig.layer({
              host: "127.0.0.1",
              port: 18080,
              databaseUrl: "postgres://rbs@localhost:15432/rbs"
            })
          )
        )
      )
    )
  )
})
