import type { Send } from "../../platform/net/Splice.ts"
import { OWN_IDS, OWN_IDS_END, type Pending, type TargetFilter, type TargetInfo } from "./ContextRules.ts"

/** Where a frame goes. */
export type { Send }

/** A session attached on this connection: to one of the context's targets, or to the connection's browser target. */
export interface Attached {
  readonly targetId: string
  /** A browser-target session: its commands are browser-level, and get the same checks. */
  readonly browser: boolean
}

/** What a `ContextScope` knows of its connection, shared by its two directions. */
export interface ScopeState {
  /** The session's browser context. */
  readonly contextId: string
  /** The context's targets, all types, as discovery last described them. */
  readonly targets: Map<string, TargetInfo>
  /** This connection's own browser target (each connection to the browser endpoint has one). */
  browserTarget: TargetInfo | undefined
  /** Sessions attached on this connection to the context's targets (and their children). */
  readonly sessions: Map<string, Attached>
  /** Sessions of other contexts' targets being let go: nothing of theirs reaches the client. */
  readonly releasing: Set<string>
  /** Windows of the context's targets, as `Browser.getWindowForTarget` answered. */
  readonly windows: Set<number>
  /** Downloads begun in the context's frames. */
  readonly downloads: Set<string>
  /** The client's commands whose answers the scope reads, by `pendingKey`. */
  readonly pending: Map<string, Pending>
  /** The client's target discovery (`Target.setDiscoverTargets`), when on. */
  clientFilter: TargetFilter | undefined
  /** The ids of the relay's own first commands: the browser target's info, discovery. */
  browserTargetId: number | undefined
  discoveryId: number | undefined
  readonly pendingKey: (sessionId: string | undefined, id: number) => string
  /** One of the relay's own commands (ids from `OWN_IDS`). */
  readonly own: (method: string, params?: object, sessionId?: string) => Send
  readonly isOurs: (info: TargetInfo | undefined) => boolean
  /** The context's target, or the connection's browser target, of that id. */
  readonly ourTarget: (targetId: unknown) => TargetInfo | undefined
}

export const makeState = (contextId: string): ScopeState => {
  let nextOwnId = OWN_IDS
  const state: ScopeState = {
    contextId,
    targets: new Map(),
    browserTarget: undefined,
    sessions: new Map(),
    releasing: new Set(),
    windows: new Set(),
    downloads: new Set(),
    pending: new Map(),
    clientFilter: undefined,
    browserTargetId: undefined,
    discoveryId: undefined,
    pendingKey: (sessionId, id) => `${sessionId ?? ""}#${id}`,
    own: (method, params, sessionId) => {
      const id = nextOwnId
      nextOwnId = nextOwnId + 1 >= OWN_IDS_END ? OWN_IDS : nextOwnId + 1
      return {
        to: "upstream",
        frame: JSON.stringify(
          sessionId === undefined
            ? { id, method, ...(params && { params }) }
            : { id, method, params, sessionId }
        )
      }
    },
    isOurs: (info) =>
      info !== undefined &&
      (info.browserContextId === contextId ||
        (info.type === "browser" && info.targetId === state.browserTarget?.targetId)),
    ourTarget: (targetId) =>
      typeof targetId !== "string"
        ? undefined
        : targetId === state.browserTarget?.targetId
          ? state.browserTarget
          : state.isOurs(state.targets.get(targetId))
            ? state.targets.get(targetId)
            : undefined
  }
  return state
}

export const toClient = (frame: string): ReadonlyArray<Send> => [{ to: "client", frame }]

export const toUpstream = (message: object): ReadonlyArray<Send> => [
  { to: "upstream", frame: JSON.stringify(message) }
]

/** An event the relay makes up for the client (the targets discovery finds already there). */
export const announce = (method: string, params: object): Send => ({
  to: "client",
  frame: JSON.stringify({ method, params })
})
