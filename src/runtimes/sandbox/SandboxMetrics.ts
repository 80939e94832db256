import { Metric } from "effect"

/** The sandbox pool in `/metrics`, as the browser pool's. */
export const sandboxPoolIdle = Metric.gauge("rbs_sandbox_pool_idle", {
  description: "Warm sandboxes waiting in the pool"
})
export const sandboxPoolTarget = Metric.gauge("rbs_sandbox_pool_target", {
  description: "Warm sandboxes the pool aims to keep now"
})
export const sandboxPoolAcquires = Metric.counter("rbs_sandbox_pool_acquires_total", {
  description: "Sandboxes handed to sessions, by result: warm or cold (launched for it, or another image)"
})
export const sandboxesLive = Metric.gauge("rbs_sandboxes", {
  description: "Sandboxes on this node: warm, starting, in use or being torn down"
})
export const sandboxLaunchSeconds = Metric.histogram("rbs_sandbox_launch_seconds", {
  description: "Time from a sandbox's mounts to its supervisor answering",
  boundaries: [0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5]
})
