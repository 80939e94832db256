import { Effect, Metric } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { SqlClient } from "effect/sql"
import { PrometheusMetrics } from "effect/observability"
import { poolIdle } from "../../runtimes/browser/PoolMetrics.ts"
import { RuntimePools } from "../../runtime/RuntimePools.ts"
import { sessionsByStatus } from "../../features/sessions/SessionMetrics.ts"
import { SessionsRepo } from "../../features/sessions/SessionsRepo.ts"
import { makeDeliveriesGauge } from "../../features/webhooks/Deliverer.ts"

const STATUSES = ["creating", "ready", "closed", "error"] as const

/**
 * `GET /metrics` in Prometheus text format. Gauges that mirror the database
 * (sessions by status, webhook deliveries by state) are read at scrape time,
 * so every node reports the truth and an idle one reads nothing between.
 */
export const layer = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const repo = yield* SessionsRepo
    const browsers = (yield* RuntimePools).of("browser")
    const deliveriesGauge = makeDeliveriesGauge(yield* SqlClient.SqlClient)
    const handler = Effect.gen(function* () {
      const counts = new Map((yield* repo.countByStatus).map((row) => [row.status, row.count]))
      for (const status of STATUSES) {
        yield* Metric.update(Metric.withAttributes(sessionsByStatus, { status }), counts.get(status) ?? 0)
      }
      yield* Metric.update(poolIdle, yield* browsers.idle)
      yield* deliveriesGauge
      const body = yield* PrometheusMetrics.format()
      return HttpServerResponse.text(body, { contentType: "text/plain; version=0.0.4; charset=utf-8" })
    })
    yield* router.add("GET", "/metrics", handler)
  })
)
