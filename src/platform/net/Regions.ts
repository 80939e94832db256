import { Redacted } from "effect"

/** What a session asks of its proxy whatever the region: refuse the hosts of the ad and tracker lists. */
interface SessionFilters {
  readonly blockAds?: boolean | undefined
}

/** Where a region's traffic leaves from (and, bound to a session, what its proxy refuses besides). */
export type EgressRegion =
  | ({ readonly name: string; readonly kind: "direct" } & SessionFilters)
  | ({
      readonly name: string
      readonly kind: "upstream"
      /** The upstream proxy, credentials included: never logged. */
      readonly url: Redacted.Redacted<string>
      /** What `proxy_ip` shows: the URL's `#fragment` when given, else the upstream's host. */
      readonly publicAddress: string
      /**
       * A caller's own upstream (a session's `proxy`), not the operator's: its address passes the
       * address policy as any destination's does, resolved once per connection.
       */
      readonly guarded?: boolean | undefined
      /** Hosts reached without the upstream (`example.com`, `*.example.com`, an address). */
      readonly bypass?: ReadonlyArray<string> | undefined
    } & SessionFilters)

export const DEFAULT_REGION: EgressRegion = { name: "local", kind: "direct" }

const NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/
const UPSTREAM_PROTOCOLS = new Set([
  "http:",
  "https:",
  "socks:",
  "socks4:",
  "socks4a:",
  "socks5:",
  "socks5h:"
])

/**
 * Parses `EGRESS_REGIONS`: comma-separated `name=direct` or
 * `name=http://user:pass@host:port[#public-ip]`. Errors never echo a URL (it
 * may hold credentials), only the region's name or position.
 */
export const parseRegions = (
  text: string | undefined
): { readonly regions: ReadonlyArray<EgressRegion> } | { readonly error: string } => {
  if (text === undefined || text.trim() === "") return { regions: [DEFAULT_REGION] }
  const regions: Array<EgressRegion> = []
  const entries = text
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0)
  for (const [index, entry] of entries.entries()) {
    const equals = entry.indexOf("=")
    const name = equals < 0 ? "" : entry.slice(0, equals).trim()
    const target = equals < 0 ? "" : entry.slice(equals + 1).trim()
    if (!NAME.test(name))
      return {
        error: `EGRESS_REGIONS entry ${index + 1}: expected name=direct or name=<proxy URL>, with a lowercase name`
      }
    if (regions.some((region) => region.name === name))
      return { error: `EGRESS_REGIONS: region ${name} is defined twice` }
    if (target === "direct") {
      regions.push({ name, kind: "direct" })
      continue
    }
    let url: URL
    try {
      url = new URL(target)
    } catch {
      return { error: `EGRESS_REGIONS: region ${name} has an invalid proxy URL` }
    }
    if (!UPSTREAM_PROTOCOLS.has(url.protocol) || url.hostname === "") {
      return { error: `EGRESS_REGIONS: region ${name} needs an http(s):// or socks:// proxy URL` }
    }
    const publicAddress = decodeURIComponent(url.hash.slice(1)) || url.hostname.replace(/^\[(.*)\]$/, "$1")
    url.hash = ""
    regions.push({ name, kind: "upstream", url: Redacted.make(url.toString()), publicAddress })
  }
  if (regions.length === 0) return { regions: [DEFAULT_REGION] }
  return { regions }
}
