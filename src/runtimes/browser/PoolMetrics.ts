import { Metric } from "effect"

/** The warm pool in `/metrics`: its size, its target, its warm-hit rate and its launches. */
export const poolIdle = Metric.gauge("rbs_browser_pool_idle", {
  description: "Warm browsers waiting in the pool"
})
export const poolLaunches = Metric.counter("rbs_browser_launches_total", {
  description: "Chromium processes launched"
})
export const poolTarget = Metric.gauge("rbs_browser_pool_target", {
  description: "Warm browsers the pool aims to keep now (adapts to the create rate and the launch time)"
})
export const poolAcquires = Metric.counter("rbs_browser_pool_acquires_total", {
  description: "Browsers handed to sessions, by result: warm (waiting in the pool) or cold (launched for it)"
})
export const browsersLive = Metric.gauge("rbs_browsers", {
  description: "Browsers on this node: warm, launching, in use or being torn down"
})
export const launchSeconds = Metric.histogram("rbs_browser_launch_seconds", {
  description: "Time from spawning Chromium to a browser ready for a session",
  boundaries: [0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10]
})

/** Context sessions' shared browsers (`isolation: "context"`). */
export const contextBrowsers = Metric.gauge("rbs_context_browsers", {
  description: "Shared browsers holding context sessions (one account and region each) on this node"
})
export const contextBrowsersStarted = Metric.counter("rbs_context_browsers_started_total", {
  description:
    "Shared browsers taken from the warm pool for context sessions (the first of an account, a recycled one's successor)"
})
export const contextAcquires = Metric.counter("rbs_context_acquires_total", {
  description: "Browser contexts handed to sessions, by result: warm (made ahead) or cold (made for it)"
})
