/**
 * How many contexts to keep made ahead for one account and region, from when
 * its context sessions asked for one: enough for the most that arrived
 * together lately, so a burst of creates finds each its context made.
 */

/** Asks older than this no longer count: the demand decays to one context made ahead (`CONTEXT_DEMAND_SECONDS`). */
export const DEFAULT_WINDOW_MS = 10_000

/** The span two asks must fall within to count as together, whatever making a context takes now. */
export const MIN_TOGETHER_MS = 20

/** An ask for a context, and how many asks (itself included) came together with it. */
export interface Ask {
  readonly at: number
  readonly together: number
}

/** The asks within the `windowMs` before `now`, oldest first. */
export const recent = (asks: ReadonlyArray<Ask>, now: number, windowMs: number): Array<Ask> =>
  asks.filter((ask) => now - ask.at <= windowMs)

/**
 * `asks` with one at `at` added (the ones past the window dropped). It came
 * together with every ask within `togetherMs` before it (the time making a
 * context takes then: asks closer than that could not all have been met by
 * one made after the first). Counted now, so that a making later faster or
 * slower does not change what a burst was.
 */
export const record = (
  asks: ReadonlyArray<Ask>,
  at: number,
  togetherMs: number,
  windowMs: number
): Array<Ask> => {
  const kept = recent(asks, at, windowMs)
  const span = Math.max(MIN_TOGETHER_MS, togetherMs)
  const together = 1 + kept.filter((ask) => at - ask.at <= span).length
  return [...kept, { at, together }]
}

/**
 * The contexts wanted made ahead at `now`: the most asks that came together
 * within the window (`windowMs`), at least one, at most `max`. Sessions that follow each
 * other want one; five asked at once want five.
 */
export const wanted = (asks: ReadonlyArray<Ask>, now: number, max: number, windowMs: number) => {
  const most = recent(asks, now, windowMs).reduce((found, ask) => Math.max(found, ask.together), 0)
  return Math.max(1, Math.min(max, most))
}

/** A running mean of how long making a context takes (ms), each new figure weighing a quarter. */
export const smooth = (mean: number, figure: number) => mean + (figure - mean) / 4
