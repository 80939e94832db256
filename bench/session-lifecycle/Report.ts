import type { ModeRun, Sample } from "./Lifecycle.ts"

import type { DensityResult } from "./Density.ts"

export interface Stats {
  readonly p50: number
  readonly p95: number
  readonly p99: number
  readonly mean: number
  readonly min: number
  readonly max: number
}

/** Nearest-rank percentile: with few samples p95 is the maximum, which is the honest reading. */
const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!

export const stats = (values: ReadonlyArray<number>): Stats => {
  const sorted = [...values].sort((a, b) => a - b)
  return {
    p50: percentile(sorted, 0.5),
    p95: percentile(sorted, 0.95),
    p99: percentile(sorted, 0.99),
    mean: values.reduce((sum, value) => sum + value, 0) / values.length,
    min: sorted[0]!,
    max: sorted[sorted.length - 1]!
  }
}

export interface FlowSummary {
  readonly sessions: number
  readonly wallMs: number
  readonly sessionsPerSecond: number
  readonly phases: Readonly<Record<string, Stats>>
  readonly samples: ReadonlyArray<Sample<string>>
}

export const summarize = <P extends string>(phases: ReadonlyArray<P>, run: ModeRun<P>): FlowSummary => ({
  sessions: run.samples.length,
  wallMs: run.wallMs,
  sessionsPerSecond: run.samples.length / (run.wallMs / 1000),
  phases: Object.fromEntries(
    phases.map((phase) => [phase, stats(run.samples.map((sample) => sample[phase]))])
  ),
  samples: run.samples
})

export interface ModeSummary {
  readonly label: string
  readonly service: FlowSummary
  readonly baseline: FlowSummary
  /** service total p50 / baseline total p50 */
  readonly ratio: number
}

export const compare = (label: string, service: FlowSummary, baseline: FlowSummary): ModeSummary => ({
  label,
  service,
  baseline,
  ratio: service.phases.total!.p50 / baseline.phases.total!.p50
})

const ms = (value: number | undefined) => (value === undefined ? "-" : `${value.toFixed(1)} ms`)

export const mb = (bytes: number | undefined) =>
  bytes === undefined ? "n/a" : `${(bytes / 1024 / 1024).toFixed(0)} MB`

/** One table per mode: a row per phase, service and baseline side by side. */
export const renderMode = (mode: ModeSummary): string => {
  const phases = [...new Set([...Object.keys(mode.service.phases), ...Object.keys(mode.baseline.phases)])]
  const total = phases.indexOf("total")
  phases.push(...phases.splice(total, 1))
  const header = ["phase", "service p50", "service p95", "baseline p50", "baseline p95"]
  const rows = phases.map((phase) => [
    phase,
    ms(mode.service.phases[phase]?.p50),
    ms(mode.service.phases[phase]?.p95),
    ms(mode.baseline.phases[phase]?.p50),
    ms(mode.baseline.phases[phase]?.p95)
  ])
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => row[column]!.length))
  )
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[0]!) : cell.padStart(widths[column]!)))
      .join("  ")
  return [
    `${mode.label}: ${mode.service.sessions} service / ${mode.baseline.sessions} baseline sessions`,
    line(header),
    line(widths.map((width) => "-".repeat(width))),
    ...rows.map(line),
    `sessions/s: service ${mode.service.sessionsPerSecond.toFixed(2)}, baseline ${mode.baseline.sessionsPerSecond.toFixed(2)}`,
    `ratio service total p50 / baseline total p50: ${mode.ratio.toFixed(2)}x`
  ].join("\n")
}

/**
 * The targets, on a 2-core machine: lifecycle p50 against the direct launch, and latencies. Paced
 * and back to back are the floor's goals (a third and a half of a launch's cost, at most), not
 * what a run reached.
 */
export const TARGETS = {
  pacedRatio: 0.25,
  sequentialRatio: 0.5,
  concurrentRatio: 0.7,
  openReadyP95Ms: 100,
  openConnectP50Ms: 25,
  connectP50Ms: 25,
  deleteP50Ms: 10
} as const

/**
 * Context sessions': no launch at all, so near a running browser's own cost (a context made ahead,
 * driven by puppeteer alone: 0.17x).
 */
export const CONTEXT_TARGETS = {
  ...TARGETS,
  sequentialRatio: 0.25,
  concurrentRatio: 0.25
} as const

export interface Check {
  readonly name: string
  readonly value: number
  readonly target: number
  readonly unit: "x" | "ms"
  readonly ok: boolean
}

export interface Verdict {
  readonly checks: ReadonlyArray<Check>
  readonly ok: boolean
  readonly line: string
}

export const verdict = (
  modes: {
    readonly sequential: ModeSummary
    readonly concurrent: ModeSummary
    readonly paced: ModeSummary
    readonly open: ModeSummary
    readonly settled: Readonly<Record<string, Stats>>
  },
  targets: Readonly<Record<keyof typeof TARGETS, number>> = TARGETS
): Verdict => {
  const TARGETS = targets
  const check = (name: string, value: number, target: number, unit: "x" | "ms"): Check => ({
    name,
    value,
    target,
    unit,
    ok: value < target
  })
  const checks = [
    check("paced lifecycle vs direct", modes.paced.ratio, TARGETS.pacedRatio, "x"),
    check("back-to-back lifecycle vs direct", modes.sequential.ratio, TARGETS.sequentialRatio, "x"),
    check("5 concurrent lifecycle vs direct", modes.concurrent.ratio, TARGETS.concurrentRatio, "x"),
    check(
      "open-loop create-to-ready p95",
      modes.open.service.phases.ready!.p95,
      TARGETS.openReadyP95Ms,
      "ms"
    ),
    check(
      "open-loop CDP connect p50",
      modes.open.service.phases.connect!.p50,
      TARGETS.openConnectP50Ms,
      "ms"
    ),
    check("back-to-back DELETE p50", modes.sequential.service.phases.delete!.p50, TARGETS.deleteP50Ms, "ms"),
    check("settled CDP connect p50", modes.settled.connect!.p50, TARGETS.connectP50Ms, "ms"),
    check("settled DELETE p50", modes.settled.delete!.p50, TARGETS.deleteP50Ms, "ms")
  ]
  const show = (c: Check) =>
    `${c.name} ${c.value.toFixed(c.unit === "x" ? 2 : 1)}${c.unit === "x" ? "x" : " ms"} (target < ${c.target}${c.unit === "x" ? "x" : " ms"}) ${c.ok ? "PASS" : "FAIL"}`
  return { checks, ok: checks.every((c) => c.ok), line: `verdict: ${checks.map(show).join("; ")}` }
}

/** Context sessions' memory target (issue 24): under a third of a browser session's. */
export const CONTEXT_MEMORY_SHARE = 1 / 3

export const renderDensity = (d: DensityResult): string =>
  `density, ${d.kind} sessions: held ${d.heldSessions} open (stopped by ${d.stoppedBy}${d.error === undefined ? "" : `: ${d.error}`}), ` +
  `create-to-ready over the ramp p50 / p95 ${d.ready?.p50.toFixed(0) ?? "-"} / ${d.ready?.p95.toFixed(0) ?? "-"} ms; ` +
  `Chromium PSS ${mb(d.pssIdleBytes)} with none open, ${mb(d.pssTopBytes)} at the top: ${mb(d.pssPerSessionBytes)} a live session`

/** The memory check, when both kinds were measured with their Chromiums in view. */
export const densityVerdict = (density: ReadonlyArray<DensityResult>): Array<string> => {
  const browser = density.find((d) => d.kind === "browser")?.pssPerSessionBytes
  const context = density.find((d) => d.kind === "context")?.pssPerSessionBytes
  if (browser === undefined || context === undefined || browser <= 0) return []
  const share = context / browser
  return [
    `memory: a context session ${(share * 100).toFixed(0)}% of a browser session's PSS (target < ${(CONTEXT_MEMORY_SHARE * 100).toFixed(0)}%) ${share < CONTEXT_MEMORY_SHARE ? "PASS" : "FAIL"}`
  ]
}

/**
 * What a session's log costs a lifecycle: sessions with logs on (the default) and with
 * `logs: false`, by turns in one paced run (p50 ms, on minus off).
 */
export const renderLogsCost = (on: FlowSummary, off: FlowSummary) =>
  [
    `session logs' cost (one at a time on a quiet machine, by turns, ${on.sessions} + ${off.sessions} sessions; p50 ms): logs on (default) / logs: false / difference`,
    ...Object.keys(on.phases).flatMap((phase) => {
      const a = on.phases[phase]
      const b = off.phases[phase]
      if (a === undefined || b === undefined) return []
      const d = a.p50 - b.p50
      return [
        `  ${phase.padEnd(12)} ${a.p50.toFixed(2).padStart(8)} ${b.p50.toFixed(2).padStart(8)} ${(d >= 0 ? "+" : "") + d.toFixed(2)}`
      ]
    })
  ].join("\n")
