// The service's side of a lifecycle, phase by phase: the spans it exports
// over OTLP (HTTP, JSON) to a collector of the bench's own, against the
// budget committed in bench/budget.json. See bench/README.md.
import * as Fs from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { type Stats, stats } from "./Report.ts"

interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
  readonly attributes: Readonly<Record<string, unknown>>
}

/** A phase of a lifecycle and the span that times it. */
interface Phase {
  readonly name: string
  /** Whether a client waits for it: teardown happens after the DELETE has answered. */
  readonly onPath: boolean
  readonly matches: (span: Span) => boolean
}

const named = (name: string) => (span: Span) => span.name === name

/** The server span of a request: `DELETE` and `/v1/sessions/{id}`, say. */
export const serverSpan = (method: string, path: RegExp) => (span: Span) =>
  span.kind === 2 &&
  span.attributes["http.request.method"] === method &&
  path.test(String(span.attributes["url.path"]))

/** The phases, in a lifecycle's order. */
export const PHASES: ReadonlyArray<Phase> = [
  { name: "admission and insert", onPath: true, matches: named("session.admission") },
  { name: "placement", onPath: true, matches: named("session.placement") },
  { name: "actor start (runtime taken)", onPath: true, matches: named("session.acquire") },
  { name: "ready (row and events)", onPath: true, matches: named("session.ready") },
  { name: "relay connect", onPath: true, matches: named("session.connect") },
  { name: "screenshot capture", onPath: true, matches: named("Sessions.screenshot") },
  {
    name: "delete answer",
    onPath: true,
    // The server span of `DELETE /v1/sessions/{id}`: from its request to its answer.
    matches: serverSpan("DELETE", /^\/v1\/sessions\/[^/]+$/)
  },
  { name: "teardown (off the path)", onPath: false, matches: named("session.teardown") }
]

const valueOf = (value: any): unknown =>
  value?.stringValue ??
  (value?.intValue === undefined ? undefined : Number(value.intValue)) ??
  value?.boolValue

/** A local OTLP/HTTP collector: every span the service exports, kept as it came. */
export const startCollector = async () => {
  const spans: Array<Span> = []
  const server = Http.createServer((request, response) => {
    const parts: Array<Buffer> = []
    request.on("data", (part: Buffer) => parts.push(part))
    request.on("end", () => {
      if (request.method === "POST" && request.url === "/v1/traces") {
        const body = JSON.parse(Buffer.concat(parts).toString("utf8"))
        for (const resource of body.resourceSpans ?? [])
          for (const scope of resource.scopeSpans ?? [])
            for (const span of scope.spans ?? [])
              spans.push({
                ...span,
                attributes: Object.fromEntries(
                  (span.attributes ?? []).map((entry: any) => [entry.key, valueOf(entry.value)])
                )
              })
      }
      response.writeHead(200, { "content-type": "application/json" })
      response.end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    /** Where the service sends its spans (`OTEL_EXPORTER_OTLP_ENDPOINT`). */
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** The spans that started within [from, to] (epoch milliseconds). */
    spansBetween: (from: number, to: number) =>
      spans.filter((span) => {
        const started = Number(BigInt(span.startTimeUnixNano) / 1_000_000n)
        return started >= from && started <= to
      }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

const durationMs = (span: Span) =>
  Number(BigInt(span.endTimeUnixNano) - BigInt(span.startTimeUnixNano)) / 1_000_000

/** Each phase's durations over `spans` (a phase with no span is left out). */
export const phaseTimes = (spans: ReadonlyArray<Span>): Record<string, Stats> =>
  Object.fromEntries(
    PHASES.flatMap((phase) => {
      const values = spans.filter(phase.matches).map(durationMs)
      return values.length === 0 ? [] : [[phase.name, stats(values)]]
    })
  )

/**
 * Every span name's count, p50 and p95 (ms), slowest p50 first: where a phase's
 * time goes (`BENCH_SPANS=1`).
 */
export const renderSpans = (spans: ReadonlyArray<Span>, limit = 40) => {
  const byName = new Map<string, Array<number>>()
  for (const span of spans) byName.set(span.name, [...(byName.get(span.name) ?? []), durationMs(span)])
  const rows = [...byName].map(([name, values]) => ({ name, count: values.length, ...stats(values) }))
  rows.sort((a, b) => b.p50 - a.p50)
  return [
    "every span of the paced mode (count, p50 / p95 ms):",
    ...rows
      .slice(0, limit)
      .map(
        (row) =>
          `  ${row.name.slice(0, 60).padEnd(60)} ${String(row.count).padStart(5)}  ${row.p50.toFixed(2)} / ${row.p95.toFixed(2)}`
      )
  ].join("\n")
}

/**
 * The median span of a phase with every span under it, each at its start's
 * offset from the phase's own: where that phase's time goes
 * (`BENCH_SPANS=tree`). Statements show their SQL's first words.
 */
export const renderMedianTree = (
  spans: ReadonlyArray<Span>,
  phaseName: string,
  matches = PHASES.find((candidate) => candidate.name === phaseName)?.matches
) => {
  const roots =
    matches === undefined ? [] : spans.filter(matches).sort((a, b) => durationMs(a) - durationMs(b))
  const root = roots[Math.floor(roots.length / 2)]
  if (root === undefined) return `${phaseName}: no span`
  const children = new Map<string, Array<Span>>()
  for (const span of spans)
    if (span.traceId === root.traceId && span.parentSpanId !== undefined && span.parentSpanId !== "")
      children.set(span.parentSpanId, [...(children.get(span.parentSpanId) ?? []), span])
  const origin = BigInt(root.startTimeUnixNano)
  const lines: Array<string> = []
  const walk = (span: Span, depth: number) => {
    const offset = Number(BigInt(span.startTimeUnixNano) - origin) / 1_000_000
    const statement = span.attributes["db.query.text"] ?? span.attributes["db.statement"]
    const label =
      typeof statement === "string"
        ? `${span.name} ${statement.replace(/\s+/g, " ").trim().slice(0, 48)}`
        : span.name
    lines.push(
      `  +${offset.toFixed(2).padStart(6)}  ${durationMs(span).toFixed(2).padStart(6)}  ${"  ".repeat(depth)}${label}`
    )
    const under = (children.get(span.spanId) ?? []).sort((a, b) =>
      BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1
    )
    for (const child of under) walk(child, depth + 1)
  }
  walk(root, 0)
  return [`the median ${phaseName} of ${roots.length} (start offset, duration ms):`, ...lines].join("\n")
}

/**
 * A phase's budget: its p50 in milliseconds, or a share of a phase the
 * direct launch's own lifecycle has in the same mode and run (a screenshot's
 * capture, which is Chromium's work either way).
 */
export type Budget = number | { readonly baselinePhase: string; readonly times: number }

/** The committed budget of each phase. */
export const readBudget = (): Readonly<Record<string, Budget>> =>
  JSON.parse(Fs.readFileSync(new URL("../budget.json", import.meta.url), "utf8")).phasesMs

/** The budget of each part of the service's own share of a context session (milliseconds, p50). */
export const readShareBudget = (): Readonly<Record<string, number>> =>
  JSON.parse(Fs.readFileSync(new URL("../budget.json", import.meta.url), "utf8")).shareMs

/** How far over its budget a phase's p50 may go before the verdict fails. */
export const BUDGET_SLACK = 1.2

export interface PhaseCheck {
  readonly phase: string
  readonly p50: number | undefined
  /** In milliseconds, in this run. */
  readonly budget: number
  /** How it was set: `"40 ms"`, or `"1.0x direct screenshot"`. */
  readonly from: string
  readonly ok: boolean
}

/**
 * Every phase of the budget against its p50: a phase with no span fails
 * (nothing timed it); `baseline` holds the direct launch's phase p50s.
 */
export const budgetChecks = (
  times: Readonly<Record<string, Stats>>,
  budget: Readonly<Record<string, Budget>>,
  baseline: Readonly<Record<string, number | undefined>>
): ReadonlyArray<PhaseCheck> =>
  PHASES.map((phase) => {
    const p50 = times[phase.name]?.p50
    const set = budget[phase.name]
    if (set === undefined) throw new Error(`bench/budget.json has no budget for "${phase.name}"`)
    const [limit, from] =
      typeof set === "number"
        ? [set, `${set} ms`]
        : [
            set.times * (baseline[set.baselinePhase] ?? Number.NaN),
            `${set.times}x direct ${set.baselinePhase}`
          ]
    return {
      phase: phase.name,
      p50,
      budget: limit,
      from,
      ok: p50 !== undefined && p50 <= limit * BUDGET_SLACK
    }
  })

/** The phases as a table, each beside its budget. */
export const renderPhases = (
  label: string,
  times: Readonly<Record<string, Stats>>,
  checks: ReadonlyArray<PhaseCheck>
) =>
  [
    `service-side phases, ${label} (p50 / p95 ms, budget p50 ms; over by more than ${Math.round((BUDGET_SLACK - 1) * 100)}% fails):`,
    ...checks.map((check) => {
      const time = times[check.phase]
      const measured = time === undefined ? "no span" : `${time.p50.toFixed(2)} / ${time.p95.toFixed(2)}`
      const relative = check.from.endsWith(" ms") ? "" : ` (${check.from})`
      const budget = `${check.budget.toFixed(check.budget < 10 ? 1 : 0)}${relative}`
      return `  ${check.phase.padEnd(28)} ${measured.padStart(16)}   budget ${budget.padStart(5)}   ${check.ok ? "ok" : "OVER"}`
    }),
    `phase budget (bench/budget.json): ${checks.every((check) => check.ok) ? "PASS" : "FAIL"}`
  ].join("\n")
