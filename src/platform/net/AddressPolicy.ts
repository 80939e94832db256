import * as Net from "node:net"
import type { CidrRange } from "../config/Cidrs.ts"

/** Why the egress proxy refuses a destination. */
export type RefusalReason =
  "private" | "loopback" | "link_local" | "cgnat" | "multicast" | "unspecified" | "reserved" | "service_port"

interface Range extends CidrRange {
  readonly reason: RefusalReason
}

// What a browser must never reach on its own: this machine, its private
// networks and the cloud metadata service. IPv4-mapped and -translated IPv6
// forms are unwrapped to IPv4 before the check.
const REFUSED: ReadonlyArray<Range> = [
  { address: "0.0.0.0", prefix: 8, family: "ipv4", reason: "unspecified" },
  { address: "10.0.0.0", prefix: 8, family: "ipv4", reason: "private" },
  { address: "100.64.0.0", prefix: 10, family: "ipv4", reason: "cgnat" },
  { address: "127.0.0.0", prefix: 8, family: "ipv4", reason: "loopback" },
  { address: "169.254.0.0", prefix: 16, family: "ipv4", reason: "link_local" },
  { address: "172.16.0.0", prefix: 12, family: "ipv4", reason: "private" },
  { address: "192.0.0.0", prefix: 24, family: "ipv4", reason: "reserved" },
  { address: "192.168.0.0", prefix: 16, family: "ipv4", reason: "private" },
  { address: "198.18.0.0", prefix: 15, family: "ipv4", reason: "reserved" },
  { address: "224.0.0.0", prefix: 4, family: "ipv4", reason: "multicast" },
  { address: "240.0.0.0", prefix: 4, family: "ipv4", reason: "reserved" },
  { address: "::", prefix: 128, family: "ipv6", reason: "unspecified" },
  { address: "::1", prefix: 128, family: "ipv6", reason: "loopback" },
  { address: "fc00::", prefix: 7, family: "ipv6", reason: "private" },
  { address: "fe80::", prefix: 10, family: "ipv6", reason: "link_local" },
  { address: "fec0::", prefix: 10, family: "ipv6", reason: "private" },
  { address: "ff00::", prefix: 8, family: "ipv6", reason: "multicast" },
  { address: "100::", prefix: 64, family: "ipv6", reason: "reserved" }
]

const hexToIpv4 = (high: string, low: string) => {
  const h = Number.parseInt(high, 16)
  const l = Number.parseInt(low, 16)
  return `${h >> 8}.${h & 255}.${l >> 8}.${l & 255}`
}

/**
 * The IPv4 address an IPv6 address stands for, when it embeds one that a
 * host would reach: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
 * (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) and 6to4 (`2002:AABB:CCDD::`).
 */
export const embeddedIpv4 = (address: string): string | undefined => {
  const lower = address.toLowerCase()
  const dotted = /^(?:::ffff:|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower)
  if (dotted !== null && Net.isIPv4(dotted[1]!)) return dotted[1]
  const hex = /^(?:::ffff:|::|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower)
  if (hex !== null) return hexToIpv4(hex[1]!, hex[2]!)
  const sixToFour = /^2002:([0-9a-f]{1,4}):([0-9a-f]{1,4}):/.exec(lower)
  if (sixToFour !== null) return hexToIpv4(sixToFour[1]!, sixToFour[2]!)
  return undefined
}

/** Strips the brackets of an IPv6 URL host and a zone id. */
export const normalizeHost = (host: string) => host.replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "")

export interface CidrParseError {
  readonly cidr: string
}

export interface AddressPolicy {
  /** Why `address` (an IP literal) may not be reached on `port`; undefined when it may. */
  readonly refusal: (address: string, port: number) => RefusalReason | undefined
}

/**
 * The SSRF guard's decision for one resolved address. `allow` opens
 * exceptions (EGRESS_ALLOW_CIDRS); `servicePort` says whether a local
 * address and port reach one of the service's own listeners (API, runner,
 * database), and `nodePort` whether any address and port are one of its
 * nodes' (their HTTP servers and runners): both refused even when allowed, so
 * no page or sandbox can drive the service or another tenant's session.
 */
export const makeAddressPolicy = (options: {
  readonly allow: ReadonlyArray<CidrRange>
  readonly servicePort: (address: string, port: number) => boolean
  readonly nodePort?: ((address: string, port: number) => boolean) | undefined
  readonly isLocalAddress: (address: string) => boolean
}): AddressPolicy => {
  const refusedLists = new Map<RefusalReason, Net.BlockList>()
  for (const range of REFUSED) {
    let list = refusedLists.get(range.reason)
    if (list === undefined) {
      list = new Net.BlockList()
      refusedLists.set(range.reason, list)
    }
    list.addSubnet(range.address, range.prefix, range.family)
  }
  const allowList = new Net.BlockList()
  for (const range of options.allow) allowList.addSubnet(range.address, range.prefix, range.family)

  const check = (address: string, family: "ipv4" | "ipv6") => {
    for (const [reason, list] of refusedLists) if (list.check(address, family)) return reason
    return undefined
  }

  return {
    refusal: (raw, port) => {
      const literal = normalizeHost(raw)
      const v4 = Net.isIPv4(literal) ? literal : Net.isIPv6(literal) ? embeddedIpv4(literal) : undefined
      if (v4 === undefined && !Net.isIPv6(literal)) return "reserved"
      const [address, family] = v4 !== undefined ? [v4, "ipv4" as const] : [literal, "ipv6" as const]
      if (options.nodePort?.(address, port) === true) return "service_port"
      // This machine's own addresses (its public one included) reach its local services.
      const reason = check(address, family) ?? (options.isLocalAddress(address) ? "loopback" : undefined)
      const local = reason === "loopback" || reason === "unspecified" || options.isLocalAddress(address)
      if (local && options.servicePort(address, port)) return "service_port"
      if (reason === undefined) return undefined
      return allowList.check(address, family) ? undefined : reason
    }
  }
}

/** The addresses of this machine's interfaces, for the local-port rule. */
export const localInterfaceAddresses = (interfaces: NodeJS.Dict<Array<{ address: string }>>) =>
  new Set(
    Object.values(interfaces).flatMap((list) => (list ?? []).map((each) => normalizeHost(each.address)))
  )
