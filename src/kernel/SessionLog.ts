import { Schema } from "effect"

// A browser session's log: what its pages and clients did, collected by the
// service on the node that runs it (`GET /v1/sessions/{id}/logs`, its live
// stream, and the network part as HAR).

/** What an event of the log is about. */
export const LOG_KINDS = [
  "request",
  "console",
  "page_error",
  "navigation",
  "target_created",
  "target_closed",
  "client_connected",
  "client_disconnected",
  "egress_refused",
  "log_truncated",
  "session_ended"
] as const
export const LogKind = Schema.Literals(LOG_KINDS)
export type LogKind = typeof LogKind.Type

/** How many events a session's log keeps, and how many bytes of them: past either, `log_truncated` and no more. */
export const MAX_LOG_EVENTS = 50_000
export const MAX_LOG_BYTES = 32 * 1024 * 1024

/** The most a text of an event (a console message, an error, a URL) holds; longer is cut and ends in `…`. */
export const MAX_LOG_TEXT = 4_096

export const LogEvent = Schema.Struct({
  id: Schema.Int.annotate({
    description: "The event's place in the session's log, from 1: the cursor of the list and the stream."
  }),
  at: Schema.String.annotate({ description: "When it happened (a request: when it ended), ISO 8601." }),
  kind: LogKind,
  data: Schema.Record(Schema.String, Schema.Json).annotate({
    description: "What happened, by kind (docs/guides/session-logs.md lists each field)."
  })
}).annotate({ identifier: "SessionLogEvent" })
export type LogEvent = typeof LogEvent.Type

export const LogPage = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(LogEvent),
  next_cursor: Schema.NullOr(Schema.String).annotate({
    description: "Pass as `cursor` for the events after this page; null on the last page of an ended session."
  }),
  has_more: Schema.Boolean,
  logs: Schema.Boolean.annotate({ description: "Whether the session keeps a log (`logs` at create)." }),
  complete: Schema.Boolean.annotate({
    description: "Whether the log is whole: the session has ended and its last events are written."
  })
}).annotate({ identifier: "SessionLogPage" })
export type LogPage = typeof LogPage.Type
