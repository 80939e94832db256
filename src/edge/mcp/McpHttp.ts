import { Effect, Layer, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { CurrentOrigin, CurrentOwner } from "../../features/policy/AuthMiddleware.ts"
import { principalKey } from "../../kernel/Owner.ts"
import { Authenticator, originOf } from "../guard/Authenticator.ts"
import { PublicUrls } from "../../platform/config/Config.ts"
import { errorResponse } from "../guard/ErrorResponses.ts"
import { authorizeRawWith } from "../guard/RawAuth.ts"
import {
  RateLimitReport,
  type RateLimitReportCell,
  rateLimitHeaders
} from "../../features/limits/RateLimitReport.ts"
import { Policy } from "../guard/Policy.ts"
import { RAW } from "../guard/RawRoutes.ts"
import * as McpMethods from "./McpMethods.ts"
import {
  BATCH_PROTOCOL,
  checksVersionHeader,
  classify,
  envelopeError,
  ErrorCode,
  headerMismatch,
  invalidParams,
  invalidRequest,
  isProtocol,
  isRecord,
  type Message,
  parseError,
  type RequestId,
  type RpcError,
  answerJson,
  answerLine,
  unsupportedProtocol
} from "./McpRpc.ts"
import * as McpSessions from "./McpSessions.ts"
import { LimitsConfig } from "../../features/limits/LimitsConfig.ts"

export const MCP_PATH = "/v1/mcp"

const SESSION_HEADER = "mcp-session-id"
const PROTOCOL_HEADER = "mcp-protocol-version"

/** A header's media types: one with `q=0` (or a `q` out of range) is refused. */
const mediaTypes = (header: string | undefined) =>
  (header ?? "").split(",").flatMap((part) => {
    const [type = "", ...parameters] = part.split(";")
    const quality = parameters.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith("q="))
    if (quality !== undefined) {
      const value = Number(quality.slice(2))
      if (!Number.isFinite(value) || value <= 0 || value > 1) return []
    }
    return [type.trim().toLowerCase()]
  })

/** Whether a Content-Type's first media type is JSON (most say exactly `application/json`). */
const isJson = (contentType: string | undefined) =>
  contentType === "application/json" || mediaTypes(contentType)[0] === "application/json"

const NOT_JSON: unique symbol = Symbol("NOT_JSON")

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return NOT_JSON
  }
}

/** What clients send (the SDK's, for one). */
const BOTH = "application/json, text/event-stream"

/**
 * Streamable HTTP asks a client to accept both JSON and an event stream, and
 * answers 406 otherwise: a client that states no preference (curl; any type)
 * is taken to accept both. The answers are JSON (no method here streams).
 */
const acceptsBoth = (accept: string | undefined) => {
  if (accept === BOTH) return true
  if (accept === undefined || accept.trim() === "" || accept.includes("*/*")) return true
  const types = mediaTypes(accept)
  return types.includes("application/json") && types.includes("text/event-stream")
}

const empty = (status: number, headers?: Record<string, string>) =>
  HttpServerResponse.empty({ status, ...(headers === undefined ? {} : { headers }) })

/** 202: accepted, nothing to answer; its length said, so a kept-alive connection needs no more. */
const accepted = (headers?: Record<string, string>) => empty(202, { ...headers, "content-length": "0" })

const json = (body: string, status: number, headers?: Record<string, string>) =>
  HttpServerResponse.text(body, {
    status,
    contentType: "application/json",
    ...(headers === undefined ? {} : { headers })
  })

/**
 * What the transport refuses, each with its JSON-RPC error (as the official SDK's server writes
 * them): a client is told why in the protocol it speaks, never handed an empty body.
 */
const TRANSPORT_ERRORS: Record<number, RpcError> = {
  400: { code: ErrorCode.invalidRequest, message: "Bad Request" },
  403: { code: ErrorCode.transport, message: "Forbidden: a request carrying an Origin header is refused" },
  404: { code: ErrorCode.sessionNotFound, message: "Session not found" },
  405: { code: ErrorCode.transport, message: "Method not allowed" },
  406: {
    code: ErrorCode.transport,
    message: "Not Acceptable: the client must accept both application/json and text/event-stream"
  },
  415: { code: ErrorCode.transport, message: "Unsupported Media Type: the body must be application/json" }
}

/** A refusal of the transport: a JSON-RPC error as one document (the status's own when none is given). */
const refuse = (status: number, id: RequestId | null, error?: object, headers?: Record<string, string>) =>
  json(envelopeError(id, error ?? TRANSPORT_ERRORS[status]!), status, headers)

const idOf = (input: unknown): RequestId | null =>
  isRecord(input) && (typeof input.id === "string" || typeof input.id === "number") ? input.id : null

/**
 * The door of `/v1/mcp`: the caller's credentials and account as any `/v1`
 * route takes them (401, 403, 404 `account_not_found` in the API's error shape),
 * then the endpoint's own rate limit, per principal, with the `X-RateLimit-*`
 * headers. The owner it finds is every tool call's.
 */
const Door = HttpRouter.middleware<{ provides: CurrentOwner }>()(
  Effect.gen(function* () {
    const policy = yield* Policy
    const authenticator = yield* Authenticator
    const { publicUrl } = yield* PublicUrls
    const publicOrigin = new URL(publicUrl).origin
    // The request's services are provided in one chain, outside the rest: a context is copied whole
    // when one more is added to a deep one, and each such copy costs more than the endpoint's own work.
    return (httpEffect) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const cell: RateLimitReportCell = { current: undefined }
        return Effect.gen(function* () {
          const owner = yield* Effect.result(
            authorizeRawWith(authenticator, request, RAW.mcp.access, publicOrigin)
          )
          if (owner._tag === "Failure") return errorResponse(owner.failure)
          const limited = yield* Effect.result(policy.spend(owner.success, RAW.mcp.limit, undefined))
          // Read now: a tool's route limit records its own verdict in the same cell afterwards.
          const headers = cell.current === undefined ? {} : rateLimitHeaders(cell.current)
          if (limited._tag === "Failure") return errorResponse(limited.failure, headers)
          const response = yield* Effect.provideService(httpEffect, CurrentOwner, owner.success)
          return HttpServerResponse.setHeaders(response, headers)
        }).pipe(
          Effect.provideService(RateLimitReport, cell),
          Effect.provideService(CurrentOrigin, originOf(request))
        )
      })
  })
)

/**
 * `POST /v1/mcp` (and the session's `DELETE`): the MCP endpoint over
 * Streamable HTTP, revisions 2025-11-25, 2025-06-18 and 2025-03-26.
 *
 * An `initialize` opens a session (`MCP-Session-Id`) in the revision it
 * settles on; every other message names its session, and may name the
 * revision (`MCP-Protocol-Version`, which must be the session's from
 * 2025-06-18 on). A request is answered with one JSON message; a
 * notification, or a client's response, with 202. A `notifications/cancelled`
 * stops its session's call of that id (answered with an empty event stream),
 * and a `DELETE` ends the session and its calls in flight (answered 404).
 * Only 2025-03-26 takes batches. A request with an `Origin` is refused (403):
 * the endpoint is for agents, not pages. Nothing is streamed, so `GET` is 405.
 */
export const layer = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const methods = yield* McpMethods.make
    const sessions = McpSessions.make(McpSessions.MAX_SESSIONS, (yield* LimitsConfig).mcpSessionsPerAccount)
    /** Who is asking: an MCP session is its opener's alone. */
    const callerOf = Effect.map(
      Effect.service(CurrentOwner),
      (owner) => `${owner.accountId}|${principalKey(owner.principal)}`
    )

    /** The session a request names, checked with the revision it names. */
    const select = (
      headers: HttpServerRequest.HttpServerRequest["headers"],
      initialize: boolean,
      caller: string
    ):
      | { readonly _tag: "Rejected"; readonly status: number; readonly error?: RpcError }
      | { readonly _tag: "Accepted"; readonly session: McpSessions.McpSession | undefined } => {
      const id = headers[SESSION_HEADER]
      // Another caller's session is as good as none: its id alone lets no one use or end it.
      const session = id === undefined ? undefined : sessions.find(id, caller)
      if (id !== undefined && session === undefined) return { _tag: "Rejected", status: 404 }
      const version = headers[PROTOCOL_HEADER]
      if (!initialize && version !== undefined) {
        if (!isProtocol(version))
          return { _tag: "Rejected", status: 400, error: unsupportedProtocol(version) }
        if (session !== undefined && checksVersionHeader(session.protocol) && version !== session.protocol)
          return { _tag: "Rejected", status: 400, error: headerMismatch(version, session.protocol) }
      }
      return { _tag: "Accepted", session }
    }

    /** A request of a session, stopped by a cancel of its id or the session's end. */
    const answer = (session: McpSessions.McpSession, id: RequestId, method: string, params: unknown) => {
      const answering = methods.request(session.protocol, method, params)
      return method === "tools/call"
        ? sessions.track(session, id, answering)
        : Effect.map(answering, (value) => ({ _tag: "Done" as const, value }))
    }

    const notify = (session: McpSessions.McpSession, method: string, params: unknown) => {
      if (method !== "notifications/cancelled" || !isRecord(params)) return
      const id = params.requestId
      if (typeof id === "string" || typeof id === "number") sessions.cancel(session, id)
    }

    /** 2025-03-26's batch: its requests answered together, in their order; what is no request gets no answer. */
    const batch = (
      headers: HttpServerRequest.HttpServerRequest["headers"],
      input: ReadonlyArray<unknown>,
      caller: string
    ) =>
      Effect.gen(function* () {
        if (input.length === 0) return refuse(400, null, invalidRequest())
        const selected = select(headers, false, caller)
        if (
          selected._tag === "Rejected" ||
          selected.session?.protocol !== BATCH_PROTOCOL ||
          input.some((message) => isRecord(message) && message.method === "initialize")
        )
          return selected._tag === "Rejected"
            ? refuse(selected.status, null, selected.error)
            : refuse(
                400,
                null,
                invalidRequest("Batches are taken only in a 2025-03-26 session, and never an initialize")
              )
        const session = selected.session
        const protocolHeader = { [PROTOCOL_HEADER]: session.protocol }
        const messages = input.map(classify)
        for (const message of messages)
          if (message._tag === "Notification") notify(session, message.method, message.params)
        const requests = messages.filter(
          (message): message is Extract<Message, { _tag: "Request" }> => message._tag === "Request"
        )
        if (requests.length === 0)
          return messages.some((message) => message._tag === "Notification")
            ? accepted(protocolHeader)
            : accepted()
        const outcomes = yield* Effect.forEach(
          requests,
          (request) =>
            Effect.map(answer(session, request.id, request.method, request.params), (outcome) =>
              outcome._tag === "Done" ? answerJson(request.id, outcome.value) : outcome._tag
            ),
          { concurrency: "unbounded" }
        )
        if (outcomes.includes("Ended")) return refuse(404, null)
        const answered = outcomes.filter((outcome) => typeof outcome !== "string")
        return answered.length === 0
          ? HttpServerResponse.stream(Stream.empty, {
              contentType: "text/event-stream",
              headers: protocolHeader
            })
          : json(`${JSON.stringify(answered)}\n`, 200, protocolHeader)
      })

    /** One message. */
    /** One message: what the session and envelope decide is answered at once; a request, by its method. */
    const single = (
      headers: HttpServerRequest.HttpServerRequest["headers"],
      input: unknown,
      caller: string
    ): Effect.Effect<
      HttpServerResponse.HttpServerResponse,
      never,
      CurrentOwner | HttpServerRequest.HttpServerRequest
    > => {
      const message = classify(input)
      const id = idOf(input)
      const selected = select(headers, message._tag === "Request" && message.method === "initialize", caller)
      if (selected._tag === "Rejected") return Effect.succeed(refuse(selected.status, id, selected.error))
      if (message._tag === "Invalid") return Effect.succeed(refuse(200, id, invalidRequest()))
      const initialize = message._tag !== "Response" && message.method === "initialize"
      const session = selected.session
      if (initialize && session !== undefined)
        return Effect.succeed(
          refuse(400, id, invalidRequest("initialize must not include an MCP-Session-Id header"))
        )
      if (!initialize && session === undefined)
        return Effect.succeed(
          refuse(
            400,
            id,
            invalidRequest("MCP-Session-Id header is required; send initialize to start a session")
          )
        )
      // A client's response, or an `initialize` sent as a notification: nothing to answer.
      if (message._tag === "Response" || session === undefined) {
        if (message._tag !== "Request") return Effect.succeed(accepted())
        const opened = methods.initialize(message.params)
        if (opened === undefined)
          return Effect.succeed(json(answerLine(message.id, { _tag: "Error", error: invalidParams }), 200))
        return Effect.map(Effect.service(CurrentOwner), (owner) => {
          const created = sessions.open(opened.protocol, caller, owner.accountId)
          return json(answerLine(message.id, { _tag: "Result", result: opened.result }), 200, {
            [SESSION_HEADER]: created.id,
            [PROTOCOL_HEADER]: created.protocol
          })
        })
      }
      const protocolHeader = { [PROTOCOL_HEADER]: session.protocol }
      if (message._tag === "Notification") {
        notify(session, message.method, message.params)
        return Effect.succeed(accepted(protocolHeader))
      }
      return Effect.map(answer(session, message.id, message.method, message.params), (outcome) => {
        if (outcome._tag === "Ended") return refuse(404, message.id)
        // A cancelled request's answer is never written: its stream ends empty.
        if (outcome._tag === "Cancelled")
          return HttpServerResponse.stream(Stream.empty, {
            contentType: "text/event-stream",
            headers: protocolHeader
          })
        return json(answerLine(message.id, outcome.value), 200, protocolHeader)
      })
    }

    /** A body that is no JSON; a session or revision the request cannot have is said first. */
    const unparsed = (headers: HttpServerRequest.HttpServerRequest["headers"], caller: string) => {
      const version = headers[PROTOCOL_HEADER]
      if (version !== undefined && !isProtocol(version))
        return refuse(400, null, unsupportedProtocol(version))
      const selected = select(headers, false, caller)
      return selected._tag === "Rejected"
        ? refuse(selected.status, null, selected.error)
        : refuse(200, null, parseError)
    }

    const post = (request: HttpServerRequest.HttpServerRequest) => {
      const headers = request.headers
      if (headers.origin !== undefined) return Effect.succeed(refuse(403, null))
      if (!isJson(headers["content-type"])) return Effect.succeed(refuse(415, null))
      if (!acceptsBoth(headers.accept)) return Effect.succeed(refuse(406, null))
      return Effect.flatMap(Effect.all([Effect.result(request.text), callerOf]), ([text, caller]) => {
        const input = text._tag === "Success" ? parseJson(text.success) : NOT_JSON
        if (input === NOT_JSON) return Effect.succeed(unparsed(headers, caller))
        return Array.isArray(input) ? batch(headers, input, caller) : single(headers, input, caller)
      })
    }

    const end = (request: HttpServerRequest.HttpServerRequest, caller: string) => {
      const headers = request.headers
      if (headers.origin !== undefined) return refuse(403, null)
      const id = headers[SESSION_HEADER]
      if (id === undefined) return refuse(400, null, invalidRequest("MCP-Session-Id header is required"))
      const selected = select(headers, false, caller)
      if (selected._tag === "Rejected") return refuse(selected.status, null, selected.error)
      sessions.end(id)
      return empty(204)
    }

    const notAllowed = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.succeed(
        request.headers.origin !== undefined
          ? refuse(403, null)
          : refuse(405, null, undefined, { allow: "POST, DELETE" })
      )
    for (const method of ["GET", "PUT", "PATCH", "OPTIONS"] as const)
      yield* router.add(method, MCP_PATH, notAllowed)
    yield* router.add("DELETE", MCP_PATH, (request) => Effect.map(callerOf, (caller) => end(request, caller)))
    yield* router.add("POST", MCP_PATH, post)
  })
).pipe(Layer.provide(Door.layer))
