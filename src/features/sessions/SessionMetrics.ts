import { Metric } from "effect"

export const readyLatency = Metric.histogram("rbs_session_create_to_ready_seconds", {
  description: "Time from POST /v1/sessions to status ready",
  boundaries: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
})

export const sessionsEnded = Metric.counter("rbs_sessions_ended_total", {
  description: "Sessions that ended, by reason"
})

export const sessionsByStatus = Metric.gauge("rbs_sessions", {
  description: "Sessions in the database, by status"
})
