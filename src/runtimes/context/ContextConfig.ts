import { Context, Layer } from "effect"
import { ConfigInputs } from "../../platform/config/Config.ts"
import type { ServiceConfigInput } from "../../platform/config/ConfigInput.ts"
import { type Availability, AVAILABLE, notAvailable } from "../../runtime/SessionRuntime.ts"
import { DEFAULT_WINDOW_MS } from "./MadeAhead.ts"

/** Context sessions (`isolation: "context"`): their shared browsers and how long those live. */
export interface ContextSettings {
  /** `MAX_CONTEXTS`: open context sessions this node holds at most; `undefined`: 4 a browser place. 0: none. */
  readonly max: number | undefined
  /** `CONTEXTS_PER_BROWSER`: open context sessions one shared browser holds at most. */
  readonly perBrowser: number
  /** `CONTEXT_BROWSER_SESSIONS`: a shared browser takes no new session after this many. */
  readonly browserSessions: number
  /** `CONTEXT_BROWSER_MEMORY_MB`: nor once its processes use more memory than this. */
  readonly browserMemoryBytes: number
  /** `CONTEXT_BROWSER_IDLE_SECONDS`: it closes this long after its account's last context session ended. */
  readonly browserIdleSeconds: number
  /**
   * `CONTEXT_STANDBY`: an account whose context sessions follow each other
   * (one within 10 s of the last) gets a second shared browser, the standby,
   * in which the next context is made while a session starts in the first:
   * making one holds a browser's UI thread up for tens of ms. It closes idle
   * as any shared browser does.
   */
  readonly standby: boolean
  /**
   * `CONTEXT_WARM_MAX`: contexts made ahead for one account and region at
   * most. It gets as many as its creates brought together lately (five at
   * once: five), one a shared browser once they slow down.
   */
  readonly warmMax: number
  /** `CONTEXT_DEMAND_SECONDS`: how long creates that came together keep their contexts made ahead. */
  readonly demandWindowMs: number
}

export const makeContextConfig = (input: ServiceConfigInput): ContextSettings => ({
  max: input.maxContexts,
  perBrowser: input.contextsPerBrowser ?? 8,
  browserSessions: input.contextBrowserSessions ?? 100,
  browserMemoryBytes: (input.contextBrowserMemoryMb ?? 1024) * 1024 * 1024,
  browserIdleSeconds: input.contextBrowserIdleSeconds ?? 60,
  standby: input.contextStandby ?? true,
  warmMax: input.contextWarmMax ?? 4,
  demandWindowMs:
    input.contextDemandSeconds === undefined ? DEFAULT_WINDOW_MS : input.contextDemandSeconds * 1000
})

/** The context sessions' settings in force (`MAX_CONTEXTS`, `CONTEXTS_PER_BROWSER`, `CONTEXT_*`). */
export class ContextConfig extends Context.Service<ContextConfig, ContextSettings>()(
  "rbs/context/ContextConfig"
) {
  static readonly layer = Layer.effect(ContextConfig, ConfigInputs.useSync(makeContextConfig))
}

/**
 * Whether this node runs context sessions: `MAX_CONTEXTS` is not 0, and the
 * node runs the browsers they share (`browsers`, the browser pool's own).
 */
export const contextAvailability = (settings: ContextSettings, browsers: Availability): Availability =>
  settings.max !== undefined && settings.max <= 0
    ? notAvailable("MAX_CONTEXTS is 0: set it above 0, or unset it, to run context sessions")
    : browsers.available
      ? AVAILABLE
      : notAvailable(`context sessions run in shared browsers, and this node runs none (${browsers.reason})`)
