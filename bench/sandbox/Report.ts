import type { Stats } from "../session-lifecycle/Report.ts"

/** The targets, on a 2-core machine. */
export const TARGETS = { warmReadyP50Ms: 50, execP50Ms: 10, execSpawnRatio: 5, ptyEchoP50Ms: 10 } as const

export interface Check {
  readonly name: string
  readonly value: number
  readonly target: number
  readonly unit: "ms" | "x"
  readonly ok: boolean
}

export const ms = (value: number) => `${value.toFixed(1)} ms`

/** Million bytes a second. */
export const mbps = (bytes: number, millis: number) => bytes / 1e6 / (millis / 1000)

/** Left-aligned first column, the rest right-aligned, as bench/session-lifecycle prints. */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => row[column]!.length))
  )
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[0]!) : cell.padStart(widths[column]!)))
      .join("  ")
      .trimEnd()
  return [line(header), line(widths.map((width) => "-".repeat(width))), ...rows.map(line)].join("\n")
}

/** A latency row: name, samples, p50, p95, max, note. */
export const latencyRow = (name: string, s: Stats, n: number, note = "") => [
  name,
  String(n),
  ms(s.p50),
  ms(s.p95),
  ms(s.max),
  note
]

export const verdict = (measured: {
  readonly warmReadyP50: number
  readonly execP50: number
  readonly execSpawnRatio: number
  readonly ptyEchoP50: number
}) => {
  const below = (name: string, value: number, target: number): Check => ({
    name,
    value,
    target,
    unit: "ms",
    ok: value < target
  })
  const checks: ReadonlyArray<Check> = [
    below("warm create-to-ready p50", measured.warmReadyP50, TARGETS.warmReadyP50Ms),
    below("exec round trip p50", measured.execP50, TARGETS.execP50Ms),
    {
      name: "exec / bare host spawn p50",
      value: measured.execSpawnRatio,
      target: TARGETS.execSpawnRatio,
      unit: "x",
      ok: measured.execSpawnRatio <= TARGETS.execSpawnRatio
    },
    below("PTY echo p50", measured.ptyEchoP50, TARGETS.ptyEchoP50Ms)
  ]
  const show = (c: Check) =>
    c.unit === "x"
      ? `${c.name} ${c.value.toFixed(2)}x (target <= ${c.target}x) ${c.ok ? "PASS" : "FAIL"}`
      : `${c.name} ${ms(c.value)} (target < ${c.target} ms) ${c.ok ? "PASS" : "FAIL"}`
  return { checks, ok: checks.every((c) => c.ok), line: `verdict: ${checks.map(show).join("; ")}` }
}
