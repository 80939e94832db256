import type { ServiceConfigInput } from "../ConfigInput.ts"

/** Context sessions (`isolation: "context"`): their shared browsers and how long those live. */
export interface ContextConfig {
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
}

export const makeContextConfig = (input: ServiceConfigInput): ContextConfig => ({
  max: input.maxContexts,
  perBrowser: input.contextsPerBrowser ?? 8,
  browserSessions: input.contextBrowserSessions ?? 100,
  browserMemoryBytes: (input.contextBrowserMemoryMb ?? 1024) * 1024 * 1024,
  browserIdleSeconds: input.contextBrowserIdleSeconds ?? 60
})
