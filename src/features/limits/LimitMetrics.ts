import { Metric } from "effect"

export const limitRejections = Metric.counter("rbs_limit_rejections_total", {
  description:
    "Requests refused by a limit, by limit (session_create, screenshot, preview_token, concurrency, balance, <objects>_per_account)"
})

export const countRejection = (limit: string) =>
  Metric.update(Metric.withAttributes(limitRejections, { limit }), 1)
