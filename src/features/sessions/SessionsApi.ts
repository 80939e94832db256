import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { audits, requires } from "../policy/Access.ts"
import { Authenticate, Authorize } from "../policy/AuthMiddleware.ts"
import {
  CapacityExhausted,
  ConcurrencyLimitReached,
  IdempotencyConflict,
  InvalidRequest,
  PaymentRequired,
  RateLimited,
  SessionNotFound,
  SessionNotOpen,
  SessionKindUnavailable,
  SessionNotReady,
  SessionTypeMismatch
} from "../../kernel/Errors.ts"
import { PerSessionRateLimit, RouteRateLimit } from "../limits/LimitsMiddleware.ts"
import {
  CreateSessionRequest,
  PageSizeFromString,
  PreviewToken,
  Session,
  SessionCreated,
  SessionList,
  TERMINAL_LIMITS,
  VIEWPORT_LIMITS
} from "../../kernel/Session.ts"
import { BulkTerminateRequest, BulkTerminateResult } from "../../kernel/Sandbox.ts"
import {
  ComputerAnswer,
  ComputerRequest,
  MAX_ACTIONS,
  MAX_TOTAL_WAIT_MS,
  OutOfViewport
} from "../../kernel/Computer.ts"
import { StorageLimitReached, WorkspaceConflict, WorkspaceNotFound } from "../../kernel/Workspace.ts"

const id = { id: Schema.String }

export class SessionsApi extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.post("create", "/v1/sessions", {
      // An empty body (decoded as null) means all defaults.
      payload: [CreateSessionRequest, Schema.Null],
      headers: {
        "idempotency-key": Schema.optionalKey(
          Schema.String.annotate({
            description:
              "Makes retries safe (Stripe's semantics): the same key and body within 24 hours answer the first response again (with `Idempotent-Replayed: true`) and start no second browser; the same key with a different body is 409 `idempotency_conflict`. Refusals (402, 429) are not remembered. Up to 255 printable ASCII characters."
          })
        )
      },
      success: SessionCreated.pipe(HttpApiSchema.status(201)),
      error: [
        PaymentRequired.Wire,
        RateLimited.Wire,
        ConcurrencyLimitReached.Wire,
        IdempotencyConflict.Wire,
        CapacityExhausted.Wire,
        SessionKindUnavailable.Wire,
        WorkspaceNotFound.Wire,
        WorkspaceConflict.Wire,
        StorageLimitReached.Wire
      ]
    })
      .annotateMerge(requires("sessions.write", "any", audits("session.created", "session")))
      .annotate(
        OpenApi.Description,
        "Starts a browser session. `ttl_seconds` defaults to 1800 (60 to 3600); `profile` is an internal label (default `default`). Answers with status `creating`: at once, or, when a browser or context made ahead is free, once the session is ready (at most 50 ms), so the first `GET` finds it `ready`. `cdp_url` is valid from then on and a CDP connect made while `creating` waits for `ready`. Refused with 402 `payment_required` when the account's balance is zero or less, 429 `rate_limited` past the creations per minute (default 20 per account), 429 `concurrency_limit` with too many open sessions (default 10 per account). 503 `capacity_exhausted` with `Retry-After` when every node already runs its `MAX_BROWSERS` (no limit is spent); 503 `session_type_unavailable`, without `Retry-After`, when no node of the service runs that kind of session at all (`MAX_BROWSERS`, `MAX_CONTEXTS` or `MAX_SANDBOXES` 0, or a node that cannot run it, such as sandboxes on a service not run as root): its message says why and what to change, and `/readyz` lists each kind a node runs. Every answer carries `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (seconds until the budget is full) and `X-RateLimit-Scope` (`account`); a 429 also `Retry-After` (seconds)."
      ),
    HttpApiEndpoint.get("list", "/v1/sessions", {
      query: {
        limit: Schema.optionalKey(PageSizeFromString),
        cursor: Schema.optionalKey(Schema.String),
        metadata: Schema.optionalKey(Schema.Array(Schema.String))
      },
      success: SessionList
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(
        OpenApi.Description,
        "Sessions of the active account, newest first. `limit` 1 to 100 (default 20); pass `next_cursor` as `cursor` for the next page (`next_cursor` is null on the last page). `metadata=key:value` (repeatable, up to 50): only sessions whose `metadata` holds each pair (an extension; a filter that is not `key:value` with a valid key, or more than 50, is 400 `invalid_field`)."
      ),
    HttpApiEndpoint.post("bulkTerminate", "/v1/sessions/bulk-terminate", {
      payload: BulkTerminateRequest,
      success: BulkTerminateResult
    })
      .annotateMerge(requires("sessions.write", "any", audits("session.bulk_terminated", "session")))
      .annotate(
        OpenApi.Description,
        "Ends open sessions of the active account: the ones in `ids` (up to 1000), or every one with `all: true` (one of the two), of one kind with `session_type`. Each ends as a DELETE ends it, with `ended_reason` `bulk_terminate`, billed once. Answers which ended (`terminated`) and which were no open session of the account, of that kind (`skipped`: unknown, another account's, already ended): safe to repeat."
      ),
    HttpApiEndpoint.get("get", "/v1/sessions/:id", {
      params: id,
      success: Session,
      error: SessionNotFound.Wire
    }).annotateMerge(requires("sessions.read")),
    HttpApiEndpoint.delete("delete", "/v1/sessions/:id", {
      params: id,
      success: HttpApiSchema.NoContent,
      error: [SessionNotFound.Wire, SessionNotOpen.Wire]
    })
      .annotateMerge(requires("sessions.write", "any", audits("session.deleted", "session", "id")))
      .annotate(
        OpenApi.Description,
        "Closes the session (`ended_reason` `client_delete`). 409 `session_not_open` if it already ended."
      ),
    HttpApiEndpoint.post("screenshot", "/v1/sessions/:id/screenshot", {
      params: id,
      success: Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "image/png" })),
      error: [
        SessionNotFound.Wire,
        SessionNotReady.Wire,
        SessionNotOpen.Wire,
        SessionTypeMismatch.Wire,
        RateLimited.Wire
      ]
    })
      .annotateMerge(requires("sessions.read"))
      .annotate(PerSessionRateLimit, "screenshot")
      .annotate(
        OpenApi.Description,
        "Raw PNG of the session's current page. 409 `session_not_ready` while creating (poll again), 409 `session_not_open` once ended. Limited per session (default 60 per minute) with the `X-RateLimit-*` headers; 429 `rate_limited` with `Retry-After` beyond."
      ),
    HttpApiEndpoint.post("computer", "/v1/sessions/:id/computer", {
      params: id,
      payload: ComputerRequest,
      success: ComputerAnswer,
      error: [
        SessionNotFound.Wire,
        SessionNotReady.Wire,
        SessionNotOpen.Wire,
        SessionTypeMismatch.Wire,
        OutOfViewport.Wire,
        RateLimited.Wire
      ]
    })
      .annotateMerge(requires("sessions.write"))
      .annotate(PerSessionRateLimit, "computer")
      .annotate(
        OpenApi.Description,
        `Drives a browser session's page in front as computer-use agents drive a screen: \`actions\` (1 to ${MAX_ACTIONS}, done in order) by viewport coordinates in CSS pixels (\`click\`, \`double_click\`, \`right_click\`, \`move\`, \`mouse_down\`, \`mouse_up\`, \`drag\` through a \`path\`, \`scroll\` by pixels), keys (\`type\` text key by key, \`key\` a chord such as \`["ctrl","a"]\`), \`wait\` (up to ${MAX_TOTAL_WAIT_MS} ms in all), \`screenshot\` and \`cursor_position\`. Each becomes the input events a person's mouse and keyboard make, through the page's input pipeline as the live view's input goes, so a page cannot tell them apart. Answers what each did, where the pointer is (kept between calls), the viewport (scrollbars excluded) and, with \`screenshot: true\` or a \`screenshot\` action (one per call), a PNG with its \`scale\` (image pixels per CSS pixel; \`screenshot_scale\` shrinks it). A point outside the viewport is 422 \`out_of_viewport\` and nothing of the call is done. Needs \`sessions.write\`, as a CDP connect does. Limited per session (default 300 calls per minute, \`LIMIT_COMPUTER_CALLS_PER_MINUTE\`) with the \`X-RateLimit-*\` headers; 429 \`rate_limited\` with \`Retry-After\` beyond.`
      ),
    HttpApiEndpoint.post("previewToken", "/v1/sessions/:id/preview-token", {
      params: id,
      payload: [Schema.Record(Schema.String, Schema.Unknown), Schema.Null],
      success: PreviewToken,
      error: [
        SessionNotFound.Wire,
        SessionNotReady.Wire,
        SessionNotOpen.Wire,
        SessionTypeMismatch.Wire,
        InvalidRequest.Wire,
        RateLimited.Wire
      ]
    })
      .annotateMerge(
        requires("sessions.read", "any", audits("session.preview_token_issued", "session", "id"))
      )
      .annotate(PerSessionRateLimit, "preview_token")
      .annotate(
        OpenApi.Description,
        "Mints a signed token for the session's live-view stream and answers its `url` (`{STREAM_BASE}/sessions/{id}/preview?token=...`; see that route for the frame and input messages). The token is bound to the session and its account and valid 10 minutes (`PREVIEW_TOKEN_TTL_SECONDS`), never past the session's TTL; mint a new one to resume. `input_enabled` is true when the caller may drive the session (`sessions.write`); a viewer's token (`sessions.read` only) streams and ignores input. The body must be `{}` (reserved for future options). Limited per session (default 10 per minute) with the `X-RateLimit-*` headers; 429 `rate_limited` with `Retry-After` beyond."
      ),
    HttpApiEndpoint.post("resize", "/v1/sessions/:id/resize", {
      params: id,
      payload: Schema.Struct({ cols: Schema.Int, rows: Schema.Int }),
      success: Schema.Struct({}),
      error: [SessionNotFound.Wire, SessionNotReady.Wire, SessionNotOpen.Wire]
    })
      .annotateMerge(requires("sessions.write", "any", audits("session.resized", "session", "id")))
      .annotate(
        OpenApi.Description,
        `A browser session: sets its window and viewport, in CSS pixels, for every client: \`cols\` ${VIEWPORT_LIMITS.cols.minimum} to ${VIEWPORT_LIMITS.cols.maximum}, \`rows\` ${VIEWPORT_LIMITS.rows.minimum} to ${VIEWPORT_LIMITS.rows.maximum}. A sandbox session: resizes its terminals (every open PTY, and the size a new one starts with), in character cells: \`cols\` ${TERMINAL_LIMITS.cols.minimum} to ${TERMINAL_LIMITS.cols.maximum}, \`rows\` ${TERMINAL_LIMITS.rows.minimum} to ${TERMINAL_LIMITS.rows.maximum}.`
      )
  )
  // Listed inner first: authenticate, pick the account and check access, then the route limit.
  .middleware(RouteRateLimit)
  .middleware(Authorize)
  .middleware(Authenticate)
  .annotate(OpenApi.Title, "Sessions") {}
