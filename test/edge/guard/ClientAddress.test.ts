import { assert, describe, it } from "@effect/vitest"
import { clientOf, hopsOf, inRanges } from "../../../src/edge/guard/ClientAddress.ts"
import { parseCidrs } from "../../../src/platform/config/Cidrs.ts"

// Who the client is behind trusted proxies: the header's hops walked from the last one back.

const trusted = inRanges(parseCidrs("10.0.0.0/8, 127.0.0.1, fd00::/8").ranges)

describe("the client's address", () => {
  it("reads each hop of either header, with ports, brackets, quotes and IPv4-mapped IPv6", () => {
    assert.deepStrictEqual(
      hopsOf("x-forwarded-for", "203.0.113.7, 10.0.0.2:8443, [2001:db8::1]:99, ::ffff:198.51.100.4"),
      ["203.0.113.7", "10.0.0.2", "2001:db8::1", "198.51.100.4"]
    )
    assert.deepStrictEqual(
      hopsOf("forwarded", 'for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711", by=x'),
      ["192.0.2.60", "2001:db8:cafe::17", undefined]
    )
    assert.deepStrictEqual(hopsOf("forwarded", "for=unknown, for=_hidden"), [undefined, undefined])
  })

  it("is the last hop that is not a trusted proxy, only when the peer is one", () => {
    assert.strictEqual(clientOf("127.0.0.1", ["203.0.113.7"], trusted), "203.0.113.7")
    assert.strictEqual(clientOf("::ffff:127.0.0.1", ["203.0.113.7"], trusted), "203.0.113.7")
    // A client's own entries come first; the proxies append after them.
    assert.strictEqual(clientOf("10.1.1.1", ["6.6.6.6", "203.0.113.7", "10.0.0.2"], trusted), "203.0.113.7")
    // Every hop trusted: the first.
    assert.strictEqual(clientOf("10.1.1.1", ["10.0.0.3", "10.0.0.2"], trusted), "10.0.0.3")
    // An untrusted peer is the client, whatever it says.
    assert.isUndefined(clientOf("192.0.2.1", ["203.0.113.7"], trusted))
    // An unreadable hop ends the walk at the peer.
    assert.isUndefined(clientOf("127.0.0.1", ["203.0.113.7", undefined], trusted))
    assert.isUndefined(clientOf("127.0.0.1", [], trusted))
  })
})
