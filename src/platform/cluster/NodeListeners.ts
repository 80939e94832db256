import { Cause, Effect, Layer, Option, Schedule } from "effect"
import * as Dns from "node:dns/promises"
import * as Net from "node:net"
import { NodeConfig } from "../config/Config.ts"
import { LocalPorts, type NodeListener } from "../net/LocalPorts.ts"
import { normalizeHost } from "../net/AddressPolicy.ts"
import { Nodes } from "./Nodes.ts"

/** The addresses `host` names: itself when it is an IP literal, else what it resolves to now (none if it does not). */
const addressesOf = (host: string) => {
  const literal = normalizeHost(host)
  if (Net.isIP(literal) !== 0) return Effect.succeed([literal])
  return Effect.promise(() =>
    Dns.lookup(literal, { all: true }).then(
      (found) => found.map((each) => each.address),
      () => []
    )
  )
}

/** The host and port of a node's `url` (`NODE_URL`) or runner address (`host:port`). */
const endpointOf = (endpoint: string, isUrl: boolean): { host: string; port: number } | undefined => {
  try {
    const url = new URL(isUrl ? endpoint : `tcp://${endpoint}`)
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80))
    return Number.isInteger(port) && port > 0 ? { host: url.hostname, port } : undefined
  } catch {
    return undefined
  }
}

/**
 * Several nodes only: every beat, the listeners of every node of the service
 * (its HTTP server at `NODE_URL`, its runner at `RUNNER_ADDRESS`), resolved to
 * addresses, become ports the egress proxy never connects to (`LocalPorts`),
 * whatever `EGRESS_ALLOW_CIDRS` opens: a page or a sandbox that reaches the
 * nodes' network still reaches none of their controls.
 */
export const layer = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* NodeConfig
    if (Option.isNone(config.runner)) return Layer.empty
    const nodes = yield* Nodes
    const ports = yield* LocalPorts
    const refresh = Effect.gen(function* () {
      const rows = yield* nodes.listeners
      const endpoints = rows.flatMap((row) => [
        endpointOf(row.url, true),
        row.runnerAddress === null ? undefined : endpointOf(row.runnerAddress, false)
      ])
      const listeners: Array<NodeListener> = []
      for (const endpoint of endpoints) {
        if (endpoint === undefined) continue
        for (const address of yield* addressesOf(endpoint.host))
          listeners.push({ address, port: endpoint.port })
      }
      yield* ports.setNodeListeners(listeners)
    }).pipe(
      // The database away for a moment: the last listeners stay until the next beat reads them.
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logWarning("node.listeners_failed", { cause })
      )
    )
    yield* refresh
    return Layer.effectDiscard(
      Effect.forkScoped(
        refresh.pipe(Effect.repeat(Schedule.spaced(config.clusterTimings.heartbeatMs)), Effect.asVoid)
      )
    )
  })
)
