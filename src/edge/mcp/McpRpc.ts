/**
 * MCP's JSON-RPC 2.0 envelope, as the endpoint reads and writes it: what a
 * message is, the error codes, and the bodies. Pure; the HTTP transport
 * (`McpHttp`) and the methods (`McpMethods`) use it.
 */

/** The MCP revisions served, newest first; an `initialize` offering another gets the first. */
export const PROTOCOLS = ["2025-11-25", "2025-06-18", "2025-03-26"] as const
export type Protocol = (typeof PROTOCOLS)[number]

export const isProtocol = (value: unknown): value is Protocol => PROTOCOLS.includes(value as Protocol)

/** The one revision whose clients may send a batch (a JSON array of messages). */
export const BATCH_PROTOCOL: Protocol = "2025-03-26"

/** Whether a session's requests that name a revision must name its own (2025-03-26 had no such header). */
export const checksVersionHeader = (protocol: Protocol) => protocol !== "2025-03-26"

export const ErrorCode = {
  parse: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  resourceNotFound: -32002,
  headerMismatch: -32020,
  unsupportedProtocol: -32022,
  /** The transport's own refusals (a method, media types, an Origin), as the SDK's server answers them. */
  transport: -32000,
  /** A session this node does not know (ended, or never opened here): start another. */
  sessionNotFound: -32001
} as const

export type RequestId = string | number

export interface RpcError {
  readonly code: number
  readonly message: string
  readonly data?: unknown
}

/** What one element of a POST's body is. */
export type Message =
  | { readonly _tag: "Request"; readonly id: RequestId; readonly method: string; readonly params: unknown }
  | { readonly _tag: "Notification"; readonly method: string; readonly params: unknown }
  /** A client's answer to a server's request: this server sends none, so it is acknowledged and dropped. */
  | { readonly _tag: "Response" }
  /** No JSON-RPC 2.0 message; `id` is its id when that is one a request may carry. */
  | { readonly _tag: "Invalid"; readonly id: RequestId | null }

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)

const isId = (value: unknown): value is RequestId => typeof value === "string" || typeof value === "number"

export const classify = (input: unknown): Message => {
  if (!isRecord(input)) return { _tag: "Invalid", id: null }
  const hasId = "id" in input
  const id = isId(input.id) ? input.id : null
  if (input.jsonrpc !== "2.0") return { _tag: "Invalid", id }
  if (typeof input.method === "string") {
    if (!hasId) return { _tag: "Notification", method: input.method, params: input.params }
    if (isId(input.id)) return { _tag: "Request", id: input.id, method: input.method, params: input.params }
  }
  const answers = "result" in input !== "error" in input
  return hasId && (id !== null || input.id === null) && answers
    ? { _tag: "Response" }
    : { _tag: "Invalid", id }
}

/** The envelope's own errors (no JSON, no message), named by their kind as clients of this endpoint have seen them. */
export const parseError = { code: ErrorCode.parse, message: "Parse error", _tag: "ParseError" }
export const invalidRequest = (message = "Invalid Request") => ({
  code: ErrorCode.invalidRequest,
  message,
  _tag: "InvalidRequest"
})

export const unsupportedProtocol = (requested: string): RpcError => ({
  code: ErrorCode.unsupportedProtocol,
  message: `Unsupported protocol version '${requested}'`,
  data: { supported: PROTOCOLS, requested }
})

export const headerMismatch = (sent: string, negotiated: Protocol): RpcError => ({
  code: ErrorCode.headerMismatch,
  message: `MCP-Protocol-Version header '${sent}' does not match negotiated protocol version '${negotiated}'`
})

export const invalidParams: RpcError = { code: ErrorCode.invalidParams, message: "Invalid method parameters" }

/** A refusal of the transport: one JSON document. */
export const envelopeError = (id: RequestId | null, error: object) =>
  JSON.stringify({ jsonrpc: "2.0", id, error })

/**
 * What a method answered, as the transport writes each message: ended by a newline. A result may
 * come already written as JSON (`json`, the same text `JSON.stringify(result)` would give): a tool's
 * record is its text content and its structured content alike, written once.
 */
export type Answer =
  | { readonly _tag: "Result"; readonly result: unknown; readonly json?: string }
  | { readonly _tag: "Error"; readonly error: RpcError }

export const result = (value: unknown): Answer => ({ _tag: "Result", result: value })
export const failure = (code: number, message: string): Answer => ({
  _tag: "Error",
  error: { code, message }
})

export const answerJson = (id: RequestId, answer: Answer) =>
  answer._tag === "Result"
    ? { jsonrpc: "2.0", id, result: answer.result }
    : { jsonrpc: "2.0", id, error: answer.error }

export const answerLine = (id: RequestId, answer: Answer) =>
  answer._tag === "Result" && answer.json !== undefined
    ? `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${answer.json}}\n`
    : `${JSON.stringify(answerJson(id, answer))}\n`
