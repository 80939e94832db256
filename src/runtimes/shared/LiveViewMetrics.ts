import { Metric } from "effect"

export const viewersOpen = Metric.gauge("rbs_liveview_viewers", {
  description: "Live-view streams open on this node"
})

export const framesSent = Metric.counter("rbs_liveview_frames_sent_total", {
  description: "JPEG frames sent to live-view viewers (each viewer counts)"
})

export const frameBytesSent = Metric.counter("rbs_liveview_bytes_sent_total", {
  description: "Bytes of JPEG frames sent to live-view viewers"
})

export const inputMessages = Metric.counter("rbs_liveview_input_total", {
  description:
    "Input messages from live-view viewers, by result: forwarded, ignored (a token without input), invalid"
})

export const screencastsRunning = Metric.gauge("rbs_liveview_screencasts", {
  description: "CDP screencasts running on this node: one per session being watched or recorded"
})
