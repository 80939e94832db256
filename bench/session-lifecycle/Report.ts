import type { ModeRun, Sample } from "./Lifecycle.ts"

export interface Stats {
  readonly p50: number
  readonly p95: number
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

export const READY_TARGET_MS = 100
export const RATIO_TARGET = 1.5

export interface Verdict {
  /** Create-to-ready p50 over sequential creates that found a warm browser in the pool. */
  readonly readyP50Ms: number | undefined
  readonly warmCreates: number
  readonly readyOk: boolean
  readonly ratios: Readonly<Record<string, number>>
  readonly ratioOk: boolean
  readonly line: string
}

/**
 * The ready target is about a warm pool, so it is judged only on creates that
 * found one: back-to-back sessions outpace the refill, and a create on an
 * empty pool waits for a cold launch (those still count in the tables).
 */
export const verdict = (warmReadyMs: ReadonlyArray<number>, modes: ReadonlyArray<ModeSummary>): Verdict => {
  const readyP50Ms = warmReadyMs.length === 0 ? undefined : stats(warmReadyMs).p50
  const readyOk = readyP50Ms !== undefined && readyP50Ms < READY_TARGET_MS
  const ratioOk = modes.every((mode) => mode.ratio <= RATIO_TARGET)
  const pass = (ok: boolean) => (ok ? "PASS" : "FAIL")
  const readyText =
    readyP50Ms === undefined ? "n/a (no create found a warm pool)" : `${readyP50Ms.toFixed(1)} ms`
  const ratioText = modes.map((mode) => `${mode.label} ${mode.ratio.toFixed(2)}x`).join(", ")
  return {
    readyP50Ms,
    warmCreates: warmReadyMs.length,
    readyOk,
    ratios: Object.fromEntries(modes.map((mode) => [mode.label, mode.ratio])),
    ratioOk,
    line:
      `verdict: create-to-ready p50 on a warm pool ${readyText} (target < ${READY_TARGET_MS} ms) ${pass(readyOk)}; ` +
      `lifecycle p50 vs direct launch ${ratioText} (target <= ${RATIO_TARGET}x) ${pass(ratioOk)}`
  }
}
