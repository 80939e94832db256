import type { Effect } from "effect"
import type { EgressRegion } from "../platform/net/Regions.ts"
import type { ProxyFailureReason } from "../kernel/Session.ts"

/** Bytes on the wire between the proxy and destinations (TLS tunnels included). */
export interface EgressCounters {
  /** Browser to destination. */
  readonly bytesUp: number
  /** Destination to browser. */
  readonly bytesDown: number
}

/** Why the caller's own upstream proxy failed a request (`proxy` at create). */
export type UpstreamFailureReason = ProxyFailureReason

/** The last time the session's own upstream failed a request, and how often it has. */
export interface UpstreamFailure {
  readonly reason: UpstreamFailureReason
  /** What the page was answered (proxy-chain's 59x, or 403/502 of the service's own checks). */
  readonly status: number
  readonly at: Date
  /** Requests it failed so far. */
  readonly failures: number
}

/** A request the proxy refused before anything left: its destination, and why (the policy's reason, `ad_host`, `unresolved`). */
export interface EgressRefusal {
  readonly host: string
  readonly port: number
  readonly reason: string
  readonly at: number
}

/** A session's view of its egress: what it moved, and where from. */
export interface EgressTap {
  readonly region: EgressRegion
  readonly counters: () => EgressCounters
  /** The address traffic leaves from, once the first connection is made. */
  readonly proxyIp: () => string | undefined
  /** The session's own upstream's last failure, if it has one and it failed. */
  readonly upstreamFailure: () => UpstreamFailure | undefined
  /** Tells `listener` of each request the proxy refuses from now on, until the returned function is called. */
  readonly onRefused: (listener: (refusal: EgressRefusal) => void) => () => void
  /**
   * Closes the proxy and every connection through it now (also done, once,
   * when its scope closes): after it, `counters` are final.
   */
  readonly close: Effect.Effect<void>
  /**
   * Asks the proxy for one of the service's own ports, which its SSRF guard
   * refuses whatever the allow-list says: the 403 proves it listens and
   * guards, and moves no byte (the self-test's egress check).
   */
  readonly probe: () => Promise<{ readonly ok: boolean; readonly detail: string }>
}
