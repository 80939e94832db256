import { Metric } from "effect"

export const egressBytes = Metric.counter("rbs_egress_bytes_total", {
  description: "Bytes sessions' browsers moved through the egress proxy, by region and direction (up, down)"
})

export const egressRefused = Metric.counter("rbs_egress_refused_total", {
  description:
    "Requests the egress proxy refused, by reason (private, loopback, link_local, service_port, ...; unbound: asked before its browser served a session; unresolved: a name with no address)"
})

export const upstreamFailures = Metric.counter("rbs_egress_upstream_failures_total", {
  description:
    "Requests a session's own upstream proxy (proxy at create) failed, by reason (auth_failed, unreachable, refused, address_refused, error)"
})
