/**
 * How many contexts to keep made ahead for one account and region, from when
 * its context sessions asked for one: enough for the most that arrived
 * together lately, so a burst of creates finds each its context made.
 */

/** Asks older than this no longer count: the demand decays to one context made ahead. */
export const DEMAND_WINDOW_MS = 10_000

/** The span two asks must fall within to count as together, whatever making a context takes now. */
export const MIN_TOGETHER_MS = 20

/** The asks within the window before `now`, oldest first. */
export const recent = (asks: ReadonlyArray<number>, now: number): Array<number> =>
  asks.filter((at) => now - at <= DEMAND_WINDOW_MS)

/** `asks` with `at` added (kept in order; the ones past the window dropped). */
export const record = (asks: ReadonlyArray<number>, at: number): Array<number> =>
  [...recent(asks, at), at].sort((a, b) => a - b)

/**
 * The contexts wanted made ahead at `now`: the most asks the window holds
 * within any span of `togetherMs` (the time making a context takes lately:
 * asks closer than that could not all have been met by one made after the
 * first), at least one, at most `max`. Sessions that follow each other want
 * one; five asked at once want five.
 */
export const wanted = (asks: ReadonlyArray<number>, now: number, togetherMs: number, max: number) => {
  const window = recent(asks, now)
  const span = Math.max(MIN_TOGETHER_MS, togetherMs)
  let most = 0
  let first = 0
  for (let last = 0; last < window.length; last++) {
    while (window[last]! - window[first]! > span) first++
    most = Math.max(most, last - first + 1)
  }
  return Math.max(1, Math.min(max, most))
}

/** A running mean of how long making a context takes (ms), each new figure weighing a quarter. */
export const smooth = (mean: number, figure: number) => mean + (figure - mean) / 4
