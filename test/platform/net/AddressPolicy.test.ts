import { assert, describe, it } from "@effect/vitest"
import { Redacted } from "effect"
import { parseCidrs } from "../../../src/platform/config/Cidrs.ts"
import { embeddedIpv4, makeAddressPolicy } from "../../../src/platform/net/AddressPolicy.ts"
import { parseRegions } from "../../../src/platform/net/Regions.ts"

const policy = (allow = "", localPorts: ReadonlyArray<number> = [8080], local: ReadonlyArray<string> = []) =>
  makeAddressPolicy({
    allow: parseCidrs(allow).ranges,
    servicePort: (_address, port) => localPorts.includes(port),
    isLocalAddress: (address) => local.includes(address)
  })

describe("AddressPolicy", () => {
  it("refuses private, loopback, link-local, CGNAT, multicast and unspecified addresses", () => {
    const guard = policy()
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["10.0.0.1", "private"],
      ["172.16.5.4", "private"],
      ["192.168.1.1", "private"],
      ["127.0.0.1", "loopback"],
      ["127.8.9.10", "loopback"],
      ["169.254.169.254", "link_local"],
      ["100.64.0.1", "cgnat"],
      ["100.127.255.254", "cgnat"],
      ["224.0.0.1", "multicast"],
      ["0.0.0.0", "unspecified"],
      ["::1", "loopback"],
      ["::", "unspecified"],
      ["fe80::1", "link_local"],
      ["fd12:3456::1", "private"],
      ["ff02::1", "multicast"],
      ["[::1]", "loopback"]
    ]
    for (const [address, reason] of cases) assert.strictEqual(guard.refusal(address, 80), reason, address)
  })

  it("unwraps IPv4 hidden in IPv6: mapped, compatible, NAT64 and 6to4", () => {
    const guard = policy()
    for (const address of [
      "::ffff:169.254.169.254",
      "::ffff:a9fe:a9fe",
      "::169.254.169.254",
      "::a9fe:a9fe",
      "64:ff9b::169.254.169.254",
      "2002:a9fe:a9fe::1"
    ]) {
      assert.strictEqual(guard.refusal(address, 80), "link_local", address)
    }
    assert.strictEqual(embeddedIpv4("::ffff:7f00:1"), "127.0.0.1")
    // `[::127.0.0.1]` reaches the proxy as `::7f00:1`.
    assert.strictEqual(embeddedIpv4("::7f00:1"), "127.0.0.1")
    assert.isUndefined(embeddedIpv4("::1"))
    assert.isUndefined(embeddedIpv4("2001:db8::1"))
  })

  it("lets public addresses through", () => {
    const guard = policy()
    for (const address of ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "100.128.0.1"]) {
      assert.isUndefined(guard.refusal(address, 443), address)
    }
  })

  it("opens exceptions for EGRESS_ALLOW_CIDRS, but never the service's own ports on this machine", () => {
    const guard = policy("127.0.0.0/8,10.1.0.0/16", [8080, 9222], ["192.0.2.10"])
    assert.isUndefined(guard.refusal("127.0.0.2", 3000))
    assert.isUndefined(guard.refusal("10.1.2.3", 80))
    assert.strictEqual(guard.refusal("10.2.0.1", 80), "private")
    assert.strictEqual(guard.refusal("127.0.0.1", 8080), "service_port")
    assert.strictEqual(guard.refusal("127.0.0.1", 9222), "service_port")
    assert.strictEqual(guard.refusal("0.0.0.0", 8080), "service_port")
    // This machine's own public address reaches its local services too.
    assert.strictEqual(guard.refusal("192.0.2.10", 22), "loopback")
    assert.strictEqual(guard.refusal("192.0.2.10", 8080), "service_port")
  })

  it("never lets a node's HTTP server or runner through, wherever it is and whatever is allowed", () => {
    const nodes = new Set(["10.1.2.3|8080", "10.1.2.4|7000", "2001:db8::5|8080"])
    const guard = makeAddressPolicy({
      allow: parseCidrs("10.1.0.0/16,2001:db8::/32").ranges,
      servicePort: () => false,
      nodePort: (address, port) => nodes.has(`${address}|${port}`),
      isLocalAddress: () => false
    })
    assert.strictEqual(guard.refusal("10.1.2.3", 8080), "service_port")
    assert.strictEqual(guard.refusal("::ffff:10.1.2.4", 7000), "service_port", "IPv4-mapped")
    assert.strictEqual(guard.refusal("2001:db8::5", 8080), "service_port")
    assert.isUndefined(guard.refusal("10.1.2.3", 80), "its other ports are the allow-list's")
    assert.isUndefined(guard.refusal("10.1.2.5", 8080))
  })

  it("parses CIDR lists and reports what it cannot read", () => {
    const parsed = parseCidrs(" 10.0.0.0/8, 127.0.0.2 ,fd00::/8, nonsense, 10.0.0.0/33 ")
    assert.deepStrictEqual(
      parsed.ranges.map((range) => `${range.address}/${range.prefix}`),
      ["10.0.0.0/8", "127.0.0.2/32", "fd00::/8"]
    )
    assert.deepStrictEqual(parsed.invalid, ["nonsense", "10.0.0.0/33"])
  })
})

describe("EGRESS_REGIONS", () => {
  it("defaults to one direct region named local", () => {
    assert.deepStrictEqual(parseRegions(undefined), { regions: [{ name: "local", kind: "direct" }] })
  })

  it("reads direct and chained regions, keeping credentials redacted", () => {
    const parsed = parseRegions(
      "local=direct, eu=http://user:p%40ss@10.0.0.5:3128#203.0.113.7,us=http://proxy.example:8080"
    )
    assert.isTrue("regions" in parsed)
    if (!("regions" in parsed)) return
    const [local, eu, us] = parsed.regions
    assert.deepStrictEqual(local, { name: "local", kind: "direct" })
    assert.strictEqual(eu?.kind, "upstream")
    if (eu?.kind !== "upstream" || us?.kind !== "upstream") return
    assert.strictEqual(Redacted.value(eu.url), "http://user:p%40ss@10.0.0.5:3128/")
    assert.strictEqual(eu.publicAddress, "203.0.113.7")
    assert.notInclude(String(eu.url), "p%40ss", "the URL is redacted when printed")
    assert.strictEqual(us.publicAddress, "proxy.example")
  })

  it("rejects malformed entries without echoing credentials", () => {
    for (const text of [
      "eu",
      "EU=direct",
      "eu=ftp://u:secret@h",
      "eu=direct,eu=direct",
      "eu=not a url secret"
    ]) {
      const parsed = parseRegions(text)
      assert.isTrue("error" in parsed, text)
      if ("error" in parsed) assert.notInclude(parsed.error, "secret", text)
    }
  })
})
