import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import * as Net from "node:net"
import * as Os from "node:os"
import { EgressSettings } from "../config/Config.ts"
import { parseCidrs } from "../config/Cidrs.ts"
import {
  type AddressPolicy,
  localInterfaceAddresses,
  makeAddressPolicy,
  normalizeHost
} from "./AddressPolicy.ts"
import { LocalPorts } from "./LocalPorts.ts"
import { type EgressRegion, parseRegions } from "./Regions.ts"

/**
 * The name under which a session reaches the service's own API through its
 * egress proxy (`RBS_API_URL` of an assistant's runtime): the proxy never
 * connects to the service's listener as a destination, so this is the one way
 * in, for the runtime's routes alone (`/v1/assistants/...`, `/v2/assistants/...`), plain HTTP,
 * authenticated by the caller's own token as any request.
 */
export const SERVICE_API_HOST = "api.rbs.internal"

export class EgressConfigError extends Schema.TaggedError<EgressConfigError>()("EgressConfigError", {
  message: Schema.String
}) {}

/**
 * The egress configuration, checked once at start: the regions a session may
 * name (`EGRESS_REGIONS`), the default one, and the SSRF guard's policy
 * (`EGRESS_ALLOW_CIDRS` plus the service's own ports).
 */
export class Egress extends Context.Service<
  Egress,
  {
    readonly regions: ReadonlyArray<EgressRegion>
    readonly defaultRegion: EgressRegion
    readonly region: (name: string) => Option.Option<EgressRegion>
    readonly policy: AddressPolicy
    /** The same guard for webhook URLs, with `WEBHOOK_ALLOW_CIDRS` as its exceptions. */
    readonly webhookPolicy: AddressPolicy
    /** Whether an address is in `WEBHOOK_ALLOW_CIDRS` (where plain http is accepted). */
    readonly webhookAllowed: (address: string) => boolean
    /** The same guard for the registries images are pulled from, with `REGISTRY_ALLOW_CIDRS` as its exceptions. */
    readonly registryPolicy: AddressPolicy
    /** Whether an address is in `REGISTRY_ALLOW_CIDRS` (where plain http is accepted). */
    readonly registryAllowed: (address: string) => boolean
  }
>()("rbs/egress/Egress") {
  static readonly layer = Layer.effect(
    Egress,
    Effect.gen(function* () {
      const config = { egress: yield* EgressSettings }
      const localPorts = yield* LocalPorts
      const parsed = parseRegions(
        config.egress.regions === undefined ? undefined : Redacted.value(config.egress.regions)
      )
      if ("error" in parsed) return yield* new EgressConfigError({ message: parsed.error })
      const regions = parsed.regions
      const defaultName = config.egress.defaultRegion ?? regions[0]!.name
      const defaultRegion = regions.find((region) => region.name === defaultName)
      if (defaultRegion === undefined) {
        return yield* new EgressConfigError({
          message: `EGRESS_DEFAULT_REGION=${defaultName} is not one of EGRESS_REGIONS (${regions.map((r) => r.name).join(", ")})`
        })
      }
      const allow = parseCidrs(config.egress.allowCidrs)
      if (allow.invalid.length > 0) {
        return yield* new EgressConfigError({
          message: `EGRESS_ALLOW_CIDRS: not an address or CIDR: ${allow.invalid.join(", ")}`
        })
      }
      /** An exceptions list of the guard's, and the check of whether an address is in it. */
      const exceptions = (name: string, cidrs: string) =>
        Effect.gen(function* () {
          const parsed = parseCidrs(cidrs)
          if (parsed.invalid.length > 0)
            return yield* new EgressConfigError({
              message: `${name}: not an address or CIDR: ${parsed.invalid.join(", ")}`
            })
          const list = new Net.BlockList()
          for (const range of parsed.ranges) list.addSubnet(range.address, range.prefix, range.family)
          return {
            ranges: parsed.ranges,
            allowed: (address: string) => {
              const literal = normalizeHost(address)
              const family = Net.isIPv4(literal) ? "ipv4" : Net.isIPv6(literal) ? "ipv6" : undefined
              return family !== undefined && list.check(literal, family)
            }
          }
        })
      const webhookAllow = yield* exceptions("WEBHOOK_ALLOW_CIDRS", config.egress.webhookAllowCidrs)
      const registryAllow = yield* exceptions("REGISTRY_ALLOW_CIDRS", config.egress.registryAllowCidrs)
      // Interfaces come and go (DHCP, VPNs): read them at most once a second.
      let interfaces = localInterfaceAddresses(Os.networkInterfaces())
      let readAt = Date.now()
      const isLocalAddress = (address: string) => {
        if (Date.now() - readAt > 1000) {
          interfaces = localInterfaceAddresses(Os.networkInterfaces())
          readAt = Date.now()
        }
        return interfaces.has(normalizeHost(address))
      }
      return Egress.of({
        regions,
        defaultRegion,
        region: (name) => Option.fromNullishOr(regions.find((region) => region.name === name)),
        policy: makeAddressPolicy({
          allow: allow.ranges,
          servicePort: localPorts.reaches,
          nodePort: localPorts.reachesNode,
          isLocalAddress
        }),
        webhookPolicy: makeAddressPolicy({
          allow: webhookAllow.ranges,
          servicePort: localPorts.reaches,
          nodePort: localPorts.reachesNode,
          isLocalAddress
        }),
        webhookAllowed: webhookAllow.allowed,
        registryPolicy: makeAddressPolicy({
          allow: registryAllow.ranges,
          servicePort: localPorts.reaches,
          nodePort: localPorts.reachesNode,
          isLocalAddress
        }),
        registryAllowed: registryAllow.allowed
      })
    })
  ).pipe(Layer.orDie)
}
