import * as Net from "node:net"

// Networks as the configuration writes them (`EGRESS_ALLOW_CIDRS`, `WEBHOOK_ALLOW_CIDRS`,
// `TRUSTED_PROXIES`).

/** A network: an address and its prefix length. */
export interface CidrRange {
  readonly address: string
  readonly prefix: number
  readonly family: "ipv4" | "ipv6"
}

/** Parses `10.0.0.0/8,fd00::/8,127.0.0.2` (a bare address is a /32 or /128). */
export const parseCidrs = (
  text: string
): { readonly ranges: ReadonlyArray<CidrRange>; readonly invalid: ReadonlyArray<string> } => {
  const ranges: Array<CidrRange> = []
  const invalid: Array<string> = []
  for (const entry of text
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part.length > 0)) {
    const [address = "", prefixText] = entry.split("/")
    const family = Net.isIPv4(address) ? "ipv4" : Net.isIPv6(address) ? "ipv6" : undefined
    const max = family === "ipv4" ? 32 : 128
    const prefix = prefixText === undefined ? max : Number(prefixText)
    if (family === undefined || !Number.isInteger(prefix) || prefix < 0 || prefix > max) invalid.push(entry)
    else ranges.push({ address, prefix, family })
  }
  return { ranges, invalid }
}
