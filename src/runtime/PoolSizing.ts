/**
 * How many warm browsers to keep: pure arithmetic, so the pool's policy is
 * tested without a browser.
 *
 * By Little's law the creates that arrive while one launch runs are
 * `rate x launch time`; keeping twice that warm absorbs the variance of both.
 * The launch time is a fast one (the lower quartile of recent launches), not
 * the average: under load launches slow down, and reading that as "keep more
 * warm" would launch more, which slows them further.
 * The rate is the larger of a short and a long window's, so a burst raises the
 * target at once and a lull lowers it slowly. Never below `BROWSER_POOL_SIZE`,
 * never beyond what the node can still place.
 */

export const SHORT_WINDOW_MS = 10_000
export const LONG_WINDOW_MS = 60_000
const HEADROOM = 2
/** Launches remembered for the estimate. */
export const LAUNCH_HISTORY = 20

/** Creates per second over the last `windowMs`, from arrival times (ms, oldest first). */
export const rateIn = (arrivals: ReadonlyArray<number>, now: number, windowMs: number): number => {
  let count = 0
  for (let i = arrivals.length - 1; i >= 0 && arrivals[i]! > now - windowMs; i--) count++
  return count / (windowMs / 1000)
}

export const demandRate = (arrivals: ReadonlyArray<number>, now: number): number =>
  Math.max(rateIn(arrivals, now, SHORT_WINDOW_MS), rateIn(arrivals, now, LONG_WINDOW_MS))

/** Drops arrivals older than the long window (the array is oldest first). */
export const pruneArrivals = (arrivals: Array<number>, now: number) => {
  let stale = 0
  while (stale < arrivals.length && arrivals[stale]! <= now - LONG_WINDOW_MS) stale++
  if (stale > 0) arrivals.splice(0, stale)
}

/** Remembers a launch's duration, keeping the last `LAUNCH_HISTORY`. */
export const recordLaunch = (recent: Array<number>, seconds: number) => {
  recent.push(seconds)
  if (recent.length > LAUNCH_HISTORY) recent.splice(0, recent.length - LAUNCH_HISTORY)
}

/** What a launch takes when the machine is not busy: the lower quartile of recent ones (1 s before any). */
export const launchEstimate = (recent: ReadonlyArray<number>): number => {
  if (recent.length === 0) return 1
  const sorted = [...recent].sort((a, b) => a - b)
  return sorted[Math.floor((sorted.length - 1) / 4)]!
}

export interface SizingInput {
  /** Creates per second, recently. */
  readonly rate: number
  /** Seconds a launch takes, recently. */
  readonly launchSeconds: number
  /** `BROWSER_POOL_SIZE`: warm browsers kept whatever the demand. */
  readonly floor: number
  /** `MAX_BROWSERS`: every browser of the node, warm, in use or being torn down. */
  readonly capacity: number
  /** Browsers that are not warm: handed to sessions, or being torn down. */
  readonly busy: number
}

/** Warm browsers to keep now. */
export const warmTarget = (input: SizingInput): number => {
  const wanted = Math.max(input.floor, Math.ceil(input.rate * input.launchSeconds * HEADROOM))
  return Math.max(0, Math.min(wanted, input.capacity - input.busy))
}

/**
 * `MAX_BROWSERS` when not set: what the memory holds (512 MiB a browser,
 * 1 GiB kept for the service and its database) and what the cores can drive
 * (five busy browsers a core), whichever is less; at least one.
 */
export const defaultCapacity = (totalMemoryBytes: number, cores: number): number =>
  Math.max(1, Math.min(Math.floor((totalMemoryBytes - 2 ** 30) / 2 ** 29), cores * 5))
