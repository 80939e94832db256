import { Effect, Option } from "effect"
import { HttpRouter, HttpServerRequest } from "effect/http"
import * as Net from "node:net"
import { ServiceConfig } from "../../platform/config/Config.ts"
import type { CidrRange } from "../../platform/config/Cidrs.ts"
import { embeddedIpv4 } from "../../platform/net/AddressPolicy.ts"

// Who the client is. The TCP peer, unless the peer is a reverse proxy the
// operator trusts (`TRUSTED_PROXIES`): then the address that proxy says it
// forwarded for, read from the header it keeps (`TRUSTED_PROXY_HEADER`:
// `X-Forwarded-For`, or RFC 7239's `Forwarded`). Limits, the audit trail and
// every other reader of `request.remoteAddress` see that address; the peer
// stays in `request.peerAddress`.

/** An address as one family writes it: an IPv4-mapped IPv6 address is its IPv4. */
const canonical = (address: string) => {
  const bare = address.replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "")
  if (Net.isIPv4(bare)) return bare
  if (!Net.isIPv6(bare)) return undefined
  return /^::ffff:/i.test(bare) ? (embeddedIpv4(bare) ?? bare.toLowerCase()) : bare.toLowerCase()
}

/** One hop's address as a header writes it: `a.b.c.d`, `a.b.c.d:port`, `v6`, `[v6]`, `[v6]:port`, quoted or not. */
const hopAddress = (text: string) => {
  const value = text.trim().replace(/^"(.*)"$/, "$1")
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3})(?::\d+)?$/.exec(value)
  if (v4 !== null) return canonical(v4[1]!)
  const v6 = /^\[([^\]]+)\](?::\d+)?$/.exec(value)
  if (v6 !== null) return canonical(v6[1]!)
  return canonical(value)
}

/** The hops a header lists, the first (the client, as the first proxy saw it) first; undefined entries are unreadable. */
export const hopsOf = (header: "x-forwarded-for" | "forwarded", value: string) =>
  value.split(",").map((element) => {
    if (header === "x-forwarded-for") return hopAddress(element)
    const pair = element
      .split(";")
      .map((part) => part.trim())
      .find((part) => part.toLowerCase().startsWith("for="))
    return pair === undefined ? undefined : hopAddress(pair.slice(4))
  })

/**
 * The client's address: walking the hops from the last (the one the trusted
 * peer added) back, the first that is not a trusted proxy; the first hop
 * when every one is. An unreadable hop (`unknown`, an obfuscated name) ends
 * the walk with the peer itself. `undefined`: the peer is not trusted, or
 * sent no such header, so the peer is the client.
 */
export const clientOf = (
  peer: string,
  hops: ReadonlyArray<string | undefined>,
  trusted: (address: string) => boolean
): string | undefined => {
  const from = canonical(peer)
  if (from === undefined || !trusted(from) || hops.length === 0) return undefined
  for (let index = hops.length - 1; index >= 0; index--) {
    const hop = hops[index]
    if (hop === undefined) return undefined
    if (index > 0 && trusted(hop)) continue
    return hop
  }
  return undefined
}

/** Whether an address is in one of `ranges`. */
export const inRanges = (ranges: ReadonlyArray<CidrRange>) => {
  const list = new Net.BlockList()
  for (const range of ranges) list.addSubnet(range.address, range.prefix, range.family)
  return (address: string) => list.check(address, Net.isIPv4(address) ? "ipv4" : "ipv6")
}

/** Gives every request its client's address, as `TRUSTED_PROXIES` lets the proxies in front say it. */
export const layer = HttpRouter.middleware(
  Effect.gen(function* () {
    const config = yield* ServiceConfig
    const trusted = inRanges(config.trustedProxies)
    const header = config.trustedProxyHeader
    return (httpEffect) =>
      config.trustedProxies.length === 0
        ? httpEffect
        : Effect.updateService(httpEffect, HttpServerRequest.HttpServerRequest, (request) => {
            const value = request.headers[header]
            const peer = Option.getOrUndefined(request.remoteAddress)
            if (value === undefined || peer === undefined) return request
            const client = clientOf(peer, hopsOf(header, value), trusted)
            return client === undefined
              ? request
              : request.modify({ remoteAddress: Option.some(client), peerAddress: request.remoteAddress })
          })
  }),
  { global: true }
)
