import { Schema } from "effect"
import { wire } from "./ApiError.ts"

// Every error the API answers with, with the status, code and message the interface
// gives it. Each class carries its wire form (`.Wire`) next to its declaration.

export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {}) {
  readonly status = 400
  readonly code = "invalid_request"
  override readonly message = "Request body is malformed."
  static readonly Wire = wire(this, () => new InvalidRequest())
}

export class InvalidField extends Schema.TaggedError<InvalidField>()("InvalidField", {
  field: Schema.String
}) {
  readonly status = 400
  readonly code = "invalid_field"
  override get message() {
    return `Invalid value for field: ${this.field}.`
  }
  static readonly Wire = wire(
    this,
    (message) => new InvalidField({ field: /: (.*)\.$/.exec(message)?.[1] ?? "" })
  )
}

export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {}) {
  readonly status = 401
  readonly code = "unauthorized"
  override readonly message = "Missing or invalid API key."
  static readonly Wire = wire(this, () => new Unauthorized())
}

export class NotAuthenticated extends Schema.TaggedError<NotAuthenticated>()("NotAuthenticated", {}) {
  readonly status = 401
  readonly code = "unauthorized"
  override readonly message = "Missing or invalid session cookie."
  static readonly Wire = wire(this, () => new NotAuthenticated())
}

export class InvalidCredentials extends Schema.TaggedError<InvalidCredentials>()("InvalidCredentials", {}) {
  readonly status = 401
  readonly code = "invalid_credentials"
  override readonly message = "Invalid email or password."
  static readonly Wire = wire(this, () => new InvalidCredentials())
}

export class PaymentRequired extends Schema.TaggedError<PaymentRequired>()("PaymentRequired", {}) {
  readonly status = 402
  readonly code = "payment_required"
  override readonly message = "Insufficient balance."
  static readonly Wire = wire(this, () => new PaymentRequired())
}

export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", {}) {
  readonly status = 403
  readonly code = "forbidden"
  override readonly message = "Access denied."
  static readonly Wire = wire(this, () => new Forbidden())
}

/** A request body past `MAX_BODY_BYTES`: refused before it is read (by its length), or as it is read. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {}) {
  readonly status = 413
  readonly code = "payload_too_large"
  override readonly message = "Request body exceeds the 32 MiB (33554432 bytes) limit."
  static readonly Wire = wire(this, () => new PayloadTooLarge())
}

export class RouteNotFound extends Schema.TaggedError<RouteNotFound>()("RouteNotFound", {}) {
  readonly status = 404
  readonly code = "not_found"
  override readonly message = "Route not found."
  static readonly Wire = wire(this, () => new RouteNotFound())
}

export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {}) {
  readonly status = 404
  readonly code = "session_not_found"
  override readonly message = "Session not found."
  static readonly Wire = wire(this, () => new SessionNotFound())
}

/** A page relay (`/sessions/{id}/devtools/page/{target_id}`) to a target that is not one of the session's pages. */
export class TargetNotFound extends Schema.TaggedError<TargetNotFound>()("TargetNotFound", {}) {
  readonly status = 404
  readonly code = "target_not_found"
  override readonly message = "No page of the session has this target id."
  static readonly Wire = wire(this, () => new TargetNotFound())
}

export class CheckoutNotFound extends Schema.TaggedError<CheckoutNotFound>()("CheckoutNotFound", {}) {
  readonly status = 404
  readonly code = "checkout_not_found"
  override readonly message = "Checkout not found."
  static readonly Wire = wire(this, () => new CheckoutNotFound())
}

export class WebhookSignatureInvalid extends Schema.TaggedError<WebhookSignatureInvalid>()(
  "WebhookSignatureInvalid",
  {}
) {
  readonly status = 400
  readonly code = "invalid_signature"
  override readonly message = "Webhook signature verification failed."
  static readonly Wire = wire(this, () => new WebhookSignatureInvalid())
}

export class IdempotencyConflict extends Schema.TaggedError<IdempotencyConflict>()(
  "IdempotencyConflict",
  {}
) {
  readonly status = 409
  readonly code = "idempotency_conflict"
  override readonly message = "Idempotency-Key was already used with a different request."
  static readonly Wire = wire(this, () => new IdempotencyConflict())
}

export class SessionNotOpen extends Schema.TaggedError<SessionNotOpen>()("SessionNotOpen", {}) {
  readonly status = 409
  readonly code = "session_not_open"
  override readonly message = "Session is already in a terminal state."
  static readonly Wire = wire(this, () => new SessionNotOpen())
}

export class SessionNotReady extends Schema.TaggedError<SessionNotReady>()("SessionNotReady", {}) {
  readonly status = 409
  readonly code = "session_not_ready"
  override readonly message = "Session is not ready yet."
  static readonly Wire = wire(this, () => new SessionNotReady())
}

export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  /** Which limit: `session_create`, `screenshot`, `preview_token`. Not on the wire. */
  limit: Schema.optional(Schema.String),
  /** Seconds until a retry can succeed (the `Retry-After` header). Not on the wire. */
  retryAfterSeconds: Schema.optional(Schema.Number)
}) {
  readonly status = 429
  readonly code = "rate_limited"
  override readonly message = "Too many requests."
  static readonly Wire = wire(this, () => new RateLimited({}))
}

export class ConcurrencyLimitReached extends Schema.TaggedError<ConcurrencyLimitReached>()(
  "ConcurrencyLimitReached",
  {}
) {
  readonly status = 429
  readonly code = "concurrency_limit"
  override readonly message = "Concurrency limit reached."
  static readonly Wire = wire(this, () => new ConcurrencyLimitReached())
}

export class RecordingNotFound extends Schema.TaggedError<RecordingNotFound>()("RecordingNotFound", {}) {
  readonly status = 404
  readonly code = "recording_not_found"
  override readonly message = "This session has no recording."
  static readonly Wire = wire(this, () => new RecordingNotFound())
}

/** 404 until the video exists: the session is still running, or its recording is being encoded. */
export class RecordingNotReady extends Schema.TaggedError<RecordingNotReady>()("RecordingNotReady", {}) {
  readonly status = 404
  readonly code = "recording_not_ready"
  override readonly message = "The recording is not ready yet."
  static readonly Wire = wire(this, () => new RecordingNotReady())
}

/** A session has `LIMIT_VIEWERS_PER_SESSION` live-view viewers already. Beyond the interface's error table. */
export class ViewerLimitReached extends Schema.TaggedError<ViewerLimitReached>()("ViewerLimitReached", {}) {
  readonly status = 429
  readonly code = "viewer_limit"
  override readonly message = "Too many viewers of this session."
  static readonly Wire = wire(this, () => new ViewerLimitReached())
}

/**
 * A session has `LIMIT_CONNECTIONS_PER_SESSION` live connections (CDP, PTY, commands, files, the
 * gateway) already, or its account `LIMIT_CONNECTIONS_PER_ACCOUNT` on the session's node. Beyond the
 * interface's error table, as `viewer_limit` is.
 */
export class ConnectionLimitReached extends Schema.TaggedError<ConnectionLimitReached>()(
  "ConnectionLimitReached",
  { of: Schema.Literals(["session", "account"]) }
) {
  readonly status = 429
  readonly code = "connection_limit"
  override get message() {
    return this.of === "session"
      ? "Too many connections to this session."
      : "Too many connections to this account's sessions on their node."
  }
  static readonly Wire = wire(
    this,
    (message) => new ConnectionLimitReached({ of: /account/.test(message) ? "account" : "session" })
  )
}

/**
 * An account holds `limit` objects of a kind already (workspaces, webhooks, live API keys, jobs kept),
 * the most its `LIMIT_*_PER_ACCOUNT` lets it keep: a create is refused, with what would make room.
 * Beyond the interface's error table.
 */
export class ResourceLimitReached extends Schema.TaggedError<ResourceLimitReached>()("ResourceLimitReached", {
  /** What the account has too many of, plural (`webhooks`, `live API keys`). */
  resource: Schema.String,
  limit: Schema.Number,
  /** What frees a slot (`delete one first`). */
  remedy: Schema.String
}) {
  readonly status = 409
  readonly code = "resource_limit"
  override get message() {
    return `This account has reached its limit of ${this.limit} ${this.resource}; ${this.remedy}.`
  }
  static readonly Wire = wire(this, (message) => {
    const [, limit = "0", resource = "", remedy = ""] =
      /^This account has reached its limit of (\d+) (.+?); (.*)\.$/.exec(message) ?? []
    return new ResourceLimitReached({ resource, limit: Number(limit), remedy })
  })
}

/** A route or connection for one kind of session asked of the other (CDP of a sandbox, a PTY of a browser). */
export class SessionTypeMismatch extends Schema.TaggedError<SessionTypeMismatch>()("SessionTypeMismatch", {
  detail: Schema.String
}) {
  readonly status = 409
  readonly code = "session_type_mismatch"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new SessionTypeMismatch({ detail: message }))
}

/** A live-view stream opened without a valid preview token for that session. */
export class InvalidPreviewToken extends Schema.TaggedError<InvalidPreviewToken>()(
  "InvalidPreviewToken",
  {}
) {
  readonly status = 401
  readonly code = "unauthorized"
  override readonly message = "Missing, invalid or expired preview token."
  static readonly Wire = wire(this, () => new InvalidPreviewToken())
}

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  {}
) {
  readonly status = 415
  readonly code = "unsupported_media_type"
  override readonly message = "Request body must be JSON (Content-Type: application/json)."
  static readonly Wire = wire(this, () => new UnsupportedMediaType())
}

export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {}) {
  readonly status = 500
  readonly code = "internal_error"
  override readonly message = "Internal server error."
  static readonly Wire = wire(this, () => new InternalError())
}

/**
 * Every node runs its `MAX_BROWSERS` (or `MAX_SANDBOXES`): no session of the kind can be placed now.
 * A kind no node runs at all is `SessionKindUnavailable` instead: waiting would not cure it.
 * Beyond the interface's error table (its 503 row gives no code).
 */
export class CapacityExhausted extends Schema.TaggedError<CapacityExhausted>()("CapacityExhausted", {
  /** Seconds a client should wait before trying again (the `Retry-After` header). Not on the wire. */
  retryAfterSeconds: Schema.optional(Schema.Number),
  /** The kind of session that found no room (the message names it). Not on the wire. */
  kind: Schema.optional(Schema.String)
}) {
  readonly status = 503
  readonly code = "capacity_exhausted"
  override get message() {
    return `No ${this.kind ?? "browser"} capacity is free; retry later.`
  }
  static readonly Wire = wire(this, () => new CapacityExhausted({}))
}

/**
 * No node of the service runs sessions of the kind asked for (its places of that kind are 0, for
 * want of something on the machine or by its settings): a retry does not help until an operator
 * changes something, which the message says. No `Retry-After`. Beyond the interface's error table.
 */
export class SessionKindUnavailable extends Schema.TaggedError<SessionKindUnavailable>()(
  "SessionKindUnavailable",
  {
    /** What the client is told: the kind, why no node runs it, what would change that. */
    detail: Schema.String
  }
) {
  readonly status = 503
  readonly code = "session_type_unavailable"
  override get message() {
    return this.detail
  }
  static readonly Wire = wire(this, (message) => new SessionKindUnavailable({ detail: message }))

  /** The service's one node runs no sessions of `kind`, for `reason` (which says what would change that). */
  static readonly here = (kind: string, reason: string) =>
    new SessionKindUnavailable({ detail: `This service runs no ${kind} sessions: ${reason}.` })

  /** None of the service's live nodes runs sessions of `kind`; this node's own `reason`, if it has one. */
  static readonly anywhere = (kind: string, reason: string | undefined) =>
    new SessionKindUnavailable({
      detail: `No node of this service runs ${kind} sessions${reason === undefined ? "" : ` (this node: ${reason})`}.`
    })
}

/** `/readyz` of a node stopped with SIGTERM: it serves its live sessions, and takes no new client. */
export class NodeDraining extends Schema.TaggedError<NodeDraining>()("NodeDraining", {}) {
  readonly status = 503
  readonly code = "draining"
  override readonly message =
    "This node is draining: it serves its live sessions until they end and takes no new ones."
  static readonly Wire = wire(this, () => new NodeDraining())
}

export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()("ServiceUnavailable", {}) {
  readonly status = 503
  readonly code = "service_unavailable"
  override readonly message = "Service temporarily unavailable."
  static readonly Wire = wire(this, () => new ServiceUnavailable())
}
