import type { Effect, Schema, Scope } from "effect"
import type { LogKind } from "../kernel/SessionLog.ts"

// The logs capability: what a live runtime's pages do (their requests, console, errors, navigations,
// tabs), told to the session's log as it happens, and what else of the session's it is told
// (clients, the end) through its live entry.

/** One event for a session's log: when (epoch ms), what, and its fields (plain JSON, bounded by the teller). */
export interface LogEntry {
  readonly kind: LogKind
  readonly at: number
  readonly data: { readonly [key: string]: Schema.Json }
}

/** Where a session's events go: called in the order they happen, never blocking the teller. */
export type LogSink = (entry: LogEntry) => void

/** A runtime whose pages can be watched: `follow` tells `sink` of their events while its scope is open. */
export interface PageLogSource {
  readonly follow: (sink: LogSink) => Effect.Effect<void, never, Scope.Scope>
}

/** A sink that keeps nothing: a session without a log. */
export const IGNORE: LogSink = () => {}

/** `text` cut to `max` characters, ending in `…` when it was longer. */
export const bounded = (text: string, max: number) =>
  text.length <= max ? text : `${text.slice(0, max - 1)}…`
