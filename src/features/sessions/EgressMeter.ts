import { Effect, Metric } from "effect"
import { egressBytes } from "../../platform/net/EgressMetrics.ts"
import type { EgressTap } from "../../runtime/EgressTap.ts"
import type { EgressFigures, LiveFigures } from "./SessionsRepo.ts"

/**
 * A session's egress as last written: flushes write what changed (at least
 * once a second while traffic flows) and feed the byte counters by region.
 */
export class EgressMeter {
  private written: LiveFigures = { bytesUp: 0, bytesDown: 0, leases: 0 }
  private counted: EgressFigures = { bytesUp: 0, bytesDown: 0 }
  readonly tap: EgressTap
  constructor(tap: EgressTap) {
    this.tap = tap
  }

  /** The figures now, counting what is new in the egress metrics. */
  read(): Effect.Effect<EgressFigures> {
    return Effect.suspend(() => {
      const now = {
        ...this.tap.counters(),
        proxyIp: this.tap.proxyIp(),
        proxyError: this.tap.upstreamFailure()
      }
      const before = this.counted
      this.counted = now
      const region = this.tap.region.name
      return Effect.all([
        Metric.update(
          Metric.withAttributes(egressBytes, { region, direction: "up" }),
          now.bytesUp - before.bytesUp
        ),
        Metric.update(
          Metric.withAttributes(egressBytes, { region, direction: "down" }),
          now.bytesDown - before.bytesDown
        )
      ]).pipe(Effect.as(now))
    })
  }

  /**
   * Writes the figures with `write`, with the session's open CDP connections
   * (`leases`), if any changed since the last write that succeeded.
   */
  flush<E>(leases: number, write: (figures: LiveFigures) => Effect.Effect<void, E>): Effect.Effect<void, E> {
    return Effect.flatMap(this.read(), (egress) => {
      const now: LiveFigures = { ...egress, leases }
      const before = this.written
      if (
        now.bytesUp === before.bytesUp &&
        now.bytesDown === before.bytesDown &&
        now.proxyIp === before.proxyIp &&
        now.proxyError?.failures === before.proxyError?.failures &&
        now.leases === before.leases
      ) {
        return Effect.void
      }
      return Effect.tap(write(now), () =>
        Effect.sync(() => {
          this.written = now
        })
      )
    })
  }
}
