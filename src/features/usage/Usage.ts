import { AssistantUsage } from "../assistants/AssistantUsage.ts"
import { Clock, Context, Effect, Layer } from "effect"
import type { UsageReport } from "../../kernel/Usage.ts"
import { type UsageGroup, UsageRepo } from "./UsageRepo.ts"

const DAY_MS = 86_400_000

/** The first instant of the calendar month (UTC) that `at` falls in. */
export const periodStart = (at: Date) => new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1))

/** `YYYY-MM-DD` of every UTC day from `from` up to and including the day of `to`. */
export const daysOf = (from: Date, to: Date): ReadonlyArray<string> => {
  const days: Array<string> = []
  for (let t = from.getTime(); t <= to.getTime(); t += DAY_MS)
    days.push(new Date(t).toISOString().slice(0, 10))
  return days
}

const sum = (groups: ReadonlyArray<UsageGroup>) => {
  let sessions = 0n
  let up = 0n
  let down = 0n
  let billed = 0n
  for (const group of groups) {
    sessions += group.sessions
    up += group.bytes_up
    down += group.bytes_down
    billed += group.billed
  }
  return { sessions, up, down, billed }
}

const groupBy = <K>(groups: ReadonlyArray<UsageGroup>, key: (group: UsageGroup) => K) => {
  const map = new Map<K, Array<UsageGroup>>()
  for (const group of groups) {
    const k = key(group)
    const list = map.get(k)
    if (list === undefined) map.set(k, [group])
    else list.push(group)
  }
  return map
}

/**
 * The usage report of the current billing period, the calendar month in UTC:
 * sessions count on the UTC day they were created, with the bytes their proxy
 * counted (live for running ones) and what they were charged at close.
 */
export class Usage extends Context.Service<
  Usage,
  { readonly current: (accountId: string) => Effect.Effect<UsageReport> }
>()("rbs/usage/Usage") {
  static readonly layerNoDeps = Layer.effect(
    Usage,
    Effect.gen(function* () {
      const repo = yield* UsageRepo
      const assistantUsage = yield* AssistantUsage
      const current = Effect.fn("Usage.current")(function* (accountId: string) {
        const to = new Date(yield* Clock.currentTimeMillis)
        const from = periodStart(to)
        const groups = yield* repo.groups(accountId, from, new Date(to.getTime() + 1))
        const totals = sum(groups)
        const byRegion = [...groupBy(groups, (g) => g.region)].map(([region, list]) => {
          const s = sum(list)
          return {
            region,
            sessions: Number(s.sessions),
            bytes_total: Number(s.up + s.down),
            billed_micro_usd: Number(s.billed)
          }
        })
        const byKey = [...groupBy(groups, (g) => g.api_key_id)].map(([keyId, list]) => {
          const s = sum(list)
          return {
            key_id: keyId,
            key_prefix: list[0]!.key_prefix,
            key_name: list[0]!.key_name,
            sessions: Number(s.sessions),
            bytes_total: Number(s.up + s.down),
            billed_micro_usd: Number(s.billed)
          }
        })
        const perDay = groupBy(groups, (g) => g.day)
        const byDay = daysOf(from, to).map((date) => {
          const s = sum(perDay.get(date) ?? [])
          return { date, bytes_total: Number(s.up + s.down), sessions: Number(s.sessions) }
        })
        return {
          period: "current",
          from,
          to,
          totals: {
            bytes_up: Number(totals.up),
            bytes_down: Number(totals.down),
            bytes_total: Number(totals.up + totals.down),
            sessions: Number(totals.sessions),
            billed_micro_usd: Number(totals.billed)
          },
          by_region: byRegion.sort(
            (a, b) => b.bytes_total - a.bytes_total || a.region.localeCompare(b.region)
          ),
          by_key: byKey.sort((a, b) => b.bytes_total - a.bytes_total || b.sessions - a.sessions),
          by_day: byDay,
          assistants: yield* assistantUsage.totals(accountId, from, new Date(to.getTime() + 1))
        } satisfies UsageReport
      })
      return Usage.of({ current })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([UsageRepo.layer, AssistantUsage.layer]))
}
