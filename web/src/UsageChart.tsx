import { useEffect, useRef } from "preact/hooks"
import type { Usage } from "./types.ts"

/**
 * Bytes and sessions by day (uPlot, loaded with this page only). The same
 * figures are in the table below the chart for anyone who cannot see it.
 */
export const UsageChart = ({ days }: { readonly days: Usage["by_day"] }) => {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    let chart: { destroy: () => void } | undefined
    let cancelled = false
    void Promise.all([import("uplot"), import("uplot/dist/uPlot.min.css")]).then(([{ default: UPlot }]) => {
      if (cancelled || box.current === null) return
      const width = Math.max(280, box.current.clientWidth)
      const x = days.map((day) => Date.parse(`${day.date}T00:00:00Z`) / 1000)
      chart = new UPlot(
        {
          width,
          height: 240,
          scales: { x: { time: true }, bytes: { auto: true }, sessions: { auto: true } },
          axes: [
            {},
            {
              scale: "bytes",
              values: (_u, ticks) => ticks.map((t) => `${(t / 1e6).toFixed(1)} MB`),
              size: 70
            },
            { scale: "sessions", side: 1, grid: { show: false } }
          ],
          series: [
            { label: "Day" },
            { label: "Bytes", scale: "bytes", stroke: "#1f5fbf", fill: "rgba(31, 95, 191, 0.12)", width: 2 },
            { label: "Sessions", scale: "sessions", stroke: "#b3541e", width: 2 }
          ]
        },
        [x, days.map((day) => day.bytes_total), days.map((day) => day.sessions)],
        box.current
      )
    })
    return () => {
      cancelled = true
      chart?.destroy()
    }
  }, [days])
  const total = days.reduce((sum, day) => sum + day.bytes_total, 0)
  return (
    <div
      ref={box}
      class="chart"
      role="img"
      aria-label={`Bytes and sessions by day: ${days.length} days, ${total} bytes in all (the table below has each day)`}
    />
  )
}
