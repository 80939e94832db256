import { Deferred, type Scope } from "effect"
import type { Made } from "./BrowserContexts.ts"
import type { LaunchedBrowser } from "../browser/Chromium.ts"

/** Contexts kept made ahead in each shared browser, each with its first page and its egress proxy. */
export const WARM_PER_BROWSER = 1

/** An account whose context sessions start this close together gets a standby browser (`CONTEXT_STANDBY`). */
export const STANDBY_AFTER_MS = 10_000

/**
 * A shared browser's memory is read at most this often (`ContextRuntime`'s
 * check after a session ends): adding up its processes' PSS walks their page
 * tables, about 9 ms of CPU a reading, which on every session end was the
 * largest part of a context session's cost in the service (`perf`).
 */
export const MEMORY_CHECK_INTERVAL_MS = 30_000

/** A browser the context sessions of one account and region share (`ContextRuntime`). */
export interface Shared {
  /** The account and region it belongs to. */
  readonly key: string
  readonly scope: Scope.Closeable
  readonly browser: LaunchedBrowser
  /** Context sessions open in it now. */
  live: number
  /** Context sessions it has taken (open or ended): it takes no more than `CONTEXT_BROWSER_SESSIONS`. */
  taken: number
  /** Takes no new session (recycled, or gone); closes once its last ends. */
  retiring: boolean
  /** When its last session ended, or it started (for the idle close). */
  idleSince: number
  readonly warm: Array<Made>
  /** Contexts being made now: its UI thread is busy. */
  making: number
  /** Contexts being disposed now: so is it. */
  disposing: number
  /** Its memory is being read (`checkMemory`). */
  measuring: boolean
  /** When its memory was last read (0: never). */
  measuredAt: number
}

export const make = (key: string, scope: Scope.Closeable, browser: LaunchedBrowser, now: number): Shared => ({
  key,
  scope,
  browser,
  live: 0,
  taken: 0,
  retiring: false,
  idleSince: now,
  warm: [],
  making: 0,
  disposing: 0,
  measuring: false,
  measuredAt: 0
})

/** Whether `host`'s memory is due a reading at `now`. */
export const memoryDue = (host: Shared, now: number) =>
  !host.measuring &&
  !host.retiring &&
  (host.measuredAt === 0 || now - host.measuredAt >= MEMORY_CHECK_INTERVAL_MS)

export const isGone = (host: Shared) => Deferred.isDoneUnsafe(host.browser.exited)

/** `host` is `key`'s and takes another session now. */
export const hasRoom = (host: Shared, key: string, perBrowser: number) =>
  host.key === key && !host.retiring && !isGone(host) && host.live < perBrowser

/**
 * The shared browser of `key` to take a session in: one with a context made
 * ahead and none being made or disposed (its UI thread free for the
 * hand-over and the client's connect) first, then one with a context made
 * ahead; fewer open sessions first among equals. `undefined`: none has room.
 */
export const pick = (shared: Iterable<Shared>, key: string, perBrowser: number): Shared | undefined => {
  const score = (host: Shared) =>
    (host.warm.length > 0 ? 2 : 0) + (host.making === 0 && host.disposing === 0 ? 1 : 0)
  let best: Shared | undefined
  for (const host of shared) {
    if (!hasRoom(host, key, perBrowser)) continue
    if (
      best === undefined ||
      score(host) > score(best) ||
      (score(host) === score(best) && host.live < best.live)
    )
      best = host
  }
  return best
}
