import { Context, Effect, Layer, Option, Redacted } from "effect"
import { DatabaseConfig, HttpConfig, NodeConfig, RedisConfig } from "../config/Config.ts"
import { normalizeHost } from "./AddressPolicy.ts"

/** A listener bound to every address of this machine. */
const ANY = "*"
const WILDCARDS = new Set(["0.0.0.0", "::", "", "localhost"])
const UNSPECIFIED = new Set(["0.0.0.0", "::"])

/** The address a listener bound to `host` answers on: one literal, or `*` for all. */
export const listenerAddress = (host: string): string => {
  const literal = normalizeHost(host).toLowerCase()
  return WILDCARDS.has(literal) ? ANY : literal.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, "$1")
}

/**
 * Whether a connection to `destination` (a local IP literal) reaches a
 * listener bound to `listener` (from `listenerAddress`). The unspecified
 * address connects to this machine itself, so it reaches every listener.
 */
export const listenerReaches = (listener: string, destination: string): boolean =>
  listener === ANY || UNSPECIFIED.has(destination) || listener === destination

const localListenerOf = (url: string): Option.Option<readonly [number, string]> => {
  try {
    const parsed = new URL(url)
    const host = normalizeHost(parsed.hostname)
    if (!WILDCARDS.has(host) && host !== "::1" && !host.startsWith("127.")) return Option.none()
    const port = Number(parsed.port || (parsed.protocol.startsWith("redis") ? 6379 : 5432))
    return Number.isInteger(port) ? Option.some([port, listenerAddress(host)] as const) : Option.none()
  } catch {
    return Option.none()
  }
}

/** A listener of another node, by one address its name resolved to. */
export interface NodeListener {
  readonly address: string
  readonly port: number
}

/**
 * The listeners the egress proxy never connects to, whatever the allow-list
 * says. On this machine: the service's own HTTP listener and runner port, and
 * its database and Redis when they are local. (No browser's DevTools or egress
 * proxy listens on the host's network at all: each is in its browser's cell,
 * reached through a Unix socket.) Each is kept with the address it is bound
 * to, so a page's own server on another loopback address that happens to share
 * a port number stays reachable. Of several nodes: every node's HTTP server
 * and runner, at the addresses their names resolve to, which the cluster keeps
 * current (`setNodeListeners`).
 */
export class LocalPorts extends Context.Service<
  LocalPorts,
  {
    /** Whether `address` (a local IP literal) and `port` reach one of this machine's listeners. */
    readonly reaches: (address: string, port: number) => boolean
    /** Whether `address` (an IP literal) and `port` are a listener of one of the service's nodes. */
    readonly reachesNode: (address: string, port: number) => boolean
    /** The nodes' listeners as they are now (each beat), replacing the last ones. */
    readonly setNodeListeners: (listeners: ReadonlyArray<NodeListener>) => Effect.Effect<void>
  }
>()("rbs/egress/LocalPorts") {
  static readonly layer = Layer.effect(
    LocalPorts,
    Effect.gen(function* () {
      const config = { ...(yield* HttpConfig), ...(yield* DatabaseConfig), ...(yield* RedisConfig) }
      const node = yield* NodeConfig
      // port -> bound address -> how many holders
      const listeners = new Map<number, Map<string, number>>()
      const hold = (port: number, address: string) => {
        const byAddress = listeners.get(port) ?? new Map<string, number>()
        byAddress.set(address, (byAddress.get(address) ?? 0) + 1)
        listeners.set(port, byAddress)
      }
      hold(config.port, listenerAddress(config.host))
      // Where this node's runner listens (several nodes only; a node alone opens no runner port).
      if (Option.isSome(node.runner))
        hold(node.runner.value.listen.port, listenerAddress(node.runner.value.listen.host))
      for (const url of [config.databaseUrl, config.redisUrl]) {
        if (Option.isSome(url)) {
          const listener = localListenerOf(Redacted.value(url.value))
          if (Option.isSome(listener)) hold(...listener.value)
        }
      }
      const reaches = (address: string, port: number) => {
        const byAddress = listeners.get(port)
        if (byAddress === undefined) return false
        const destination = normalizeHost(address).toLowerCase()
        for (const listener of byAddress.keys()) if (listenerReaches(listener, destination)) return true
        return false
      }
      let nodeListeners = new Set<string>()
      const nodeKey = (address: string, port: number) => `${normalizeHost(address).toLowerCase()}|${port}`
      return LocalPorts.of({
        reaches,
        reachesNode: (address, port) => nodeListeners.has(nodeKey(address, port)),
        setNodeListeners: (listeners) =>
          Effect.sync(() => {
            nodeListeners = new Set(listeners.map((listener) => nodeKey(listener.address, listener.port)))
          })
      })
    })
  )
}
