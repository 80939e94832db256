import { assert, describe, it } from "@effect/vitest"
import { GATEWAY_DEFAULT_PORT, gatewayHostOf, gatewayOrigin } from "../../../src/edge/live/GatewayHost.ts"

const id = "sess_0e6f3a52-3c1e-4a8f-9b7d-2f4c6a8e1b3d"

describe("GatewayHost", () => {
  it("reads the session and port from a host under the domain, and nothing else", () => {
    assert.deepStrictEqual(gatewayHostOf(`8000-${id}.gw.example.com`, "gw.example.com"), { id, port: 8000 })
    assert.deepStrictEqual(gatewayHostOf(`8000-${id}.GW.example.com:8443`, "gw.example.com"), {
      id,
      port: 8000
    })
    assert.deepStrictEqual(gatewayHostOf(`${id}.gw.example.com`, "gw.example.com"), {
      id,
      port: GATEWAY_DEFAULT_PORT
    })
    for (const host of [
      "gw.example.com",
      `${id}.example.com`,
      `8000-${id}.gw.example.com.evil.test`,
      `x.8000-${id}.gw.example.com`,
      `0-${id}.gw.example.com`,
      `70000-${id}.gw.example.com`,
      "8000-sess_nope.gw.example.com",
      `8000-${id}gw.example.com`
    ]) {
      assert.isUndefined(gatewayHostOf(host, "gw.example.com"), host)
    }
    assert.isUndefined(gatewayHostOf(`8000-${id}.gw.example.com`, undefined), "unset: no host form")
  })

  it("builds the origin on PUBLIC_URL's scheme and port", () => {
    assert.strictEqual(
      gatewayOrigin("https://api.example.com", "gw.example.com", id, 8000),
      `https://8000-${id}.gw.example.com`
    )
    assert.strictEqual(
      gatewayOrigin("http://127.0.0.1:8080", "rbs.localhost", id, 3000),
      `http://3000-${id}.rbs.localhost:8080`
    )
  })
})
