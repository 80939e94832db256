import { Schema } from "effect"
import { wire } from "./ApiError.ts"

// Every error the API answers with, with the code and message SPEC.md gives it.
// Each class carries its wire form (`.Wire`) next to its declaration.

export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {}) {
  override readonly message = "Request body is malformed."
  static readonly Wire = wire(this, {
    status: 400,
    code: "invalid_request",
    decode: () => new InvalidRequest()
  })
}

export class InvalidField extends Schema.TaggedError<InvalidField>()("InvalidField", {
  field: Schema.String
}) {
  override get message() {
    return `Invalid value for field: ${this.field}.`
  }
  static readonly Wire = wire(this, {
    status: 400,
    code: "invalid_field",
    decode: (message) => new InvalidField({ field: /: (.*)\.$/.exec(message)?.[1] ?? "" })
  })
}

export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {}) {
  override readonly message = "Missing or invalid API key."
  static readonly Wire = wire(this, { status: 401, code: "unauthorized", decode: () => new Unauthorized() })
}

export class NotAuthenticated extends Schema.TaggedError<NotAuthenticated>()("NotAuthenticated", {}) {
  override readonly message = "Missing or invalid session cookie."
  static readonly Wire = wire(this, {
    status: 401,
    code: "unauthorized",
    decode: () => new NotAuthenticated()
  })
}

export class InvalidCredentials extends Schema.TaggedError<InvalidCredentials>()("InvalidCredentials", {}) {
  override readonly message = "Invalid email or password."
  static readonly Wire = wire(this, {
    status: 401,
    code: "invalid_credentials",
    decode: () => new InvalidCredentials()
  })
}

export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", {}) {
  override readonly message = "Access denied."
  static readonly Wire = wire(this, { status: 403, code: "forbidden", decode: () => new Forbidden() })
}

export class RouteNotFound extends Schema.TaggedError<RouteNotFound>()("RouteNotFound", {}) {
  override readonly message = "Route not found."
  static readonly Wire = wire(this, { status: 404, code: "not_found", decode: () => new RouteNotFound() })
}

export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {}) {
  override readonly message = "Session not found."
  static readonly Wire = wire(this, {
    status: 404,
    code: "session_not_found",
    decode: () => new SessionNotFound()
  })
}

export class EmailTaken extends Schema.TaggedError<EmailTaken>()("EmailTaken", {}) {
  override readonly message = "Email is already registered."
  static readonly Wire = wire(this, { status: 409, code: "email_taken", decode: () => new EmailTaken() })
}

export class SessionNotOpen extends Schema.TaggedError<SessionNotOpen>()("SessionNotOpen", {}) {
  override readonly message = "Session is already in a terminal state."
  static readonly Wire = wire(this, {
    status: 409,
    code: "session_not_open",
    decode: () => new SessionNotOpen()
  })
}

export class SessionNotReady extends Schema.TaggedError<SessionNotReady>()("SessionNotReady", {}) {
  override readonly message = "Session is not ready yet."
  static readonly Wire = wire(this, {
    status: 409,
    code: "session_not_ready",
    decode: () => new SessionNotReady()
  })
}

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  {}
) {
  override readonly message = "Request body must be JSON (Content-Type: application/json)."
  static readonly Wire = wire(this, {
    status: 415,
    code: "unsupported_media_type",
    decode: () => new UnsupportedMediaType()
  })
}

export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {}) {
  override readonly message = "Internal server error."
  static readonly Wire = wire(this, {
    status: 500,
    code: "internal_error",
    decode: () => new InternalError()
  })
}

export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()("ServiceUnavailable", {}) {
  override readonly message = "Service temporarily unavailable."
  static readonly Wire = wire(this, {
    status: 503,
    code: "service_unavailable",
    decode: () => new ServiceUnavailable()
  })
}
