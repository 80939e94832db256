import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import { SessionNotFound } from "../../kernel/Errors.ts"
import { LOG_KINDS, LogPage } from "../../kernel/SessionLog.ts"

const id = { id: Schema.String }

/** Events of a page: 1 to 1000, 100 by default. */
export const LOG_PAGE_DEFAULT = 100
export const LOG_PAGE_MAX = 1000

export const LogQuery = {
  cursor: Schema.optionalKey(
    Schema.String.annotate({
      description: "A page's `next_cursor` (or an event's `id`): the events after it."
    })
  ),
  limit: Schema.optionalKey(
    Schema.FiniteFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: LOG_PAGE_MAX }))
  ),
  kind: Schema.optionalKey(
    Schema.String.annotate({
      description: `Only events of these kinds, comma-separated: ${LOG_KINDS.map((kind) => `\`${kind}\``).join(", ")}.`
    })
  ),
  since: Schema.optionalKey(
    Schema.String.annotate({ description: "Only events at or after this time (ISO 8601)." })
  ),
  until: Schema.optionalKey(
    Schema.String.annotate({ description: "Only events before this time (ISO 8601)." })
  )
}

/** A session's log, as pages of events and as the HAR of its requests. */
export class SessionLogsApi extends HttpApiGroup.make("logs")
  .add(
    HttpApiEndpoint.get("list", "/v1/sessions/:id/logs", {
      params: id,
      query: LogQuery,
      success: LogPage,
      error: SessionNotFound.Wire
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(
        OpenApi.Description,
        `The session's log, oldest first: its pages' requests (each once it ends), console messages, uncaught errors and navigations, the tabs opened and closed, the requests its egress proxy refused, the clients that connected and left, and its end with the reason (see the session logs guide for each kind's fields). Collected by the service while the session runs, written every half second, and kept \`SESSION_LOG_RETENTION_DAYS\` (7) after it ends. \`limit\` 1 to ${LOG_PAGE_MAX} (default ${LOG_PAGE_DEFAULT}); \`next_cursor\` is where the next page starts, null once the session has ended and nothing is left; while it runs the last page's \`next_cursor\` is where new events will come. \`kind\`, \`since\` and \`until\` filter. Credentials are never in it: \`Authorization\`, \`Proxy-Authorization\`, cookies and credential parameters of URLs are redacted. A session created with \`logs: false\` (and a sandbox) answers an empty page with \`logs: false\`.`
      ),
    HttpApiEndpoint.get("stream", "/v1/sessions/:id/logs/stream", {
      params: id,
      query: { after: LogQuery.cursor, kind: LogQuery.kind },
      headers: {
        "last-event-id": Schema.optionalKey(
          Schema.String.annotate({
            description: "The last event's `id` the client has: it resumes after it."
          })
        )
      },
      success: Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/event-stream" })),
      error: SessionNotFound.Wire
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(
        OpenApi.Description,
        'The session\'s log as Server-Sent Events, as it grows: each event is `id: <id>`, `event: <kind>` and `data:` the event as the list gives it. It starts after `Last-Event-ID` (an `EventSource` resends it when it reconnects) or `after` (default: from the first event), so a client that lost its connection misses nothing. `kind` filters as the list does. A comment (`: keep-alive`) comes every 15 s without events. Once the session has ended and its log is whole, `event: end` (`data: {"complete":true}`) closes the stream; a session created with `logs: false` gets it at once (`complete: false`).'
      ),
    HttpApiEndpoint.get("har", "/v1/sessions/:id/har", {
      params: id,
      success: Schema.Record(Schema.String, Schema.Json).annotate({ description: "A HAR 1.2 document." }),
      error: SessionNotFound.Wire
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(
        OpenApi.Description,
        "The session's requests as a HAR 1.2 document (`log.entries`, one a request and one a redirect hop, in the order they ended), from its log: headers redacted as the log is, no bodies, `_transferSize` the bytes Chromium received for each (what the egress proxy carried to the page, before TLS), `_error` and `_refusedByProxy` for the failed and the refused. Open it in Chrome DevTools' network panel or any HAR viewer."
      )
  )
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Sessions") {}
