/**
 * The gateway's side that talks to the program: the request rewritten for it
 * (hop-by-hop headers and the caller's credentials dropped), sent on a
 * connection the supervisor dials, and its answer rewritten for the client.
 */
import { Effect, Stream } from "effect"
import { Cookies, type HttpServerRequest, HttpServerResponse } from "effect/http"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as Http from "node:http"
import type { IncomingMessage } from "node:http"
import type { Socket } from "node:net"
import { InvalidField } from "../../kernel/Errors.ts"
import { PortNotListening } from "../../kernel/SandboxErrors.ts"
import { INTERNAL_PREFIX, type Here } from "./SessionDoor.ts"
import { LINK_COOKIE, LINK_PARAM } from "./GatewayTokens.ts"
import { bearerToken } from "../guard/Credentials.ts"

/** Request headers a program in the sandbox never sees: hop-by-hop ones, and the caller's credentials. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "authorization",
  "x-rbs-node-token"
])

/**
 * Every answer of a program in the sandbox is a document of an opaque origin
 * (`Content-Security-Policy: sandbox`): served on this service's own origin,
 * it could otherwise read the dashboard's cookie-backed API as the visitor.
 * Scripts, forms, popups and downloads work; same-origin storage does not.
 */
const SANDBOX_CSP = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

/** The Cookie header without this service's own cookies. */
const foreignCookies = (header: string | undefined) =>
  header
    ?.split(";")
    .map((part) => part.trim())
    .filter((part) => part !== "" && !/^(service_session|rbs_gateway)=/.test(part))
    .join("; ")

/**
 * Where the client reached the gateway: `path`, `{PUBLIC_URL}/s/{id}/{port}/`
 * on the service's own origin; `origin`, a per-session origin
 * (`GatewayHost`), whose requests cross the node hop as `/o/{id}/{port}/`.
 */
export type GatewayForm = "path" | "origin"

const PREFIX: Record<GatewayForm, string> = { path: "/s", origin: "/o" }

/**
 * The path and query the program is asked for: what follows `/s/{id}/{port}`
 * (or `/o/...`), without the link's token, and without a key sent as
 * `?token=` (the path form's credential when there is no Bearer header: the
 * program never sees the caller's key, as it never sees `Authorization`).
 */
const targetOf = (
  request: HttpServerRequest.HttpServerRequest,
  form: GatewayForm,
  id: string,
  port: string
) => {
  const parsed = new URL(request.url, "http://gateway")
  parsed.searchParams.delete(LINK_PARAM)
  if (form === "path" && bearerToken(request) === undefined) parsed.searchParams.delete("token")
  // Reached through the door from another node, the path carries the twin route's prefix.
  const pathname = parsed.pathname.startsWith(`${INTERNAL_PREFIX}/`)
    ? parsed.pathname.slice(INTERNAL_PREFIX.length)
    : parsed.pathname
  const prefix = `${PREFIX[form]}/${id}/${port}`
  const rest = pathname.startsWith(prefix) ? pathname.slice(prefix.length) : pathname
  return `${rest === "" ? "/" : rest}${parsed.search}`
}

const portOf = (text: string | undefined) => {
  const port = Number(text)
  return Number.isInteger(port) && port >= 1 && port <= 65_535 ? port : undefined
}

/** Asks the program for the request over a connection the supervisor dialed inside the sandbox. */
const exchange = (
  socket: Socket,
  request: HttpServerRequest.HttpServerRequest,
  path: string,
  port: number,
  forUpgrade: boolean
) =>
  new Promise<
    | { readonly kind: "response"; readonly response: IncomingMessage }
    | {
        readonly kind: "upgrade"
        readonly response: IncomingMessage
        readonly socket: Socket
        readonly head: Buffer
      }
  >((resolve, reject) => {
    const headers: Record<string, string | Array<string>> = {}
    for (const [name, value] of Object.entries(request.headers)) {
      if (!HOP_BY_HOP.has(name) && name !== "cookie") headers[name] = value
    }
    const cookies = foreignCookies(request.headers.cookie)
    if (cookies !== undefined && cookies !== "") headers.cookie = cookies
    headers.host = `127.0.0.1:${port}`
    if (forUpgrade) {
      headers.connection = "Upgrade"
      headers.upgrade = request.headers.upgrade ?? "websocket"
    }
    // No agent: the request goes on the connection the supervisor dialed, and only there.
    const outgoing = Http.request({
      // Handed over paused by the dial (no byte read before its reader came); the response comes
      // only after the request is written, so nothing arrives before the client's parser listens.
      createConnection: () => socket.resume(),
      method: request.method,
      path,
      headers
    })
    outgoing.once("response", (response) => resolve({ kind: "response", response }))
    outgoing.once("upgrade", (response, upgraded, head) =>
      resolve({ kind: "upgrade", response, socket: upgraded as Socket, head })
    )
    outgoing.once("error", reject)
    if (forUpgrade || request.method === "GET" || request.method === "HEAD") outgoing.end()
    else {
      const body = NodeHttpServerRequest.toIncomingMessage(request) as IncomingMessage
      body.pipe(outgoing)
    }
  })

/**
 * The program's response headers as the client gets them. On the service's
 * origin: an opaque-origin document, its cookies kept to its own path. On
 * its own origin: as the program sent them, its cookies kept to its own host.
 */
const responseHeaders = (response: IncomingMessage, form: GatewayForm, id: string, port: string) => {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(response.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name === "content-length" || name === "set-cookie")
      continue
    const text = Array.isArray(value) ? value.join(", ") : value
    // What the program says goes to the client only if it is a header at all.
    if (validHeader(name, text)) headers[name] = text
  }
  if (form === "path") headers["content-security-policy"] = SANDBOX_CSP
  return {
    headers,
    cookies: (response.headers["set-cookie"] ?? []).map((cookie) => scopeCookie(cookie, form, id, port))
  }
}

const validHeader = (name: string, value: string) => {
  try {
    Http.validateHeaderName(name)
    Http.validateHeaderValue(name, value)
    return true
  } catch {
    return false
  }
}

/**
 * A cookie a program sets, never under one of the service's names, and
 * confined: to its own gateway path on the service's origin, to its own host
 * on its own origin (no `Domain`, which would send it to the other sessions'
 * hosts under the domain).
 */
const scopeCookie = (cookie: string, form: GatewayForm, id: string, port: string) => {
  const [pair = "", ...attributes] = cookie.split(";").map((part) => part.trim())
  const name = pair.split("=")[0] ?? ""
  const confined = form === "path" ? /^(path|domain)=/i : /^domain=/i
  const kept = attributes.filter((attribute) => !confined.test(attribute))
  const safeName = name === "service_session" || name === LINK_COOKIE ? `app_${name}` : name
  const path = form === "path" ? [`Path=/s/${id}/${port}/`] : []
  return [`${safeName}${pair.slice(name.length)}`, ...path, ...kept].join("; ")
}

/**
 * The gateway on the node that runs the sandbox: the request goes to the
 * port inside the sandbox over a connection its supervisor dials (the
 * sandbox's network has no other way in), HTTP answered as the program
 * answers (streamed), a WebSocket upgrade spliced both ways. Bytes both ways
 * count as the session's egress.
 */
export const proxyFor =
  (form: GatewayForm): Here<"gateway", InvalidField | PortNotListening> =>
  (request, connection, _owner, params) =>
    Effect.gen(function* () {
      const id = params.id ?? ""
      const portText = params.port ?? ""
      const port = portOf(portText)
      if (port === undefined) return yield* new InvalidField({ field: "port" })
      const gateway = connection.runtime.gateway
      const dialed = yield* gateway
        .dial(port)
        .pipe(Effect.catchTag("SupervisorError", () => Effect.fail(new PortNotListening())))
      const count = () => gateway.count(dialed.bytesRead, dialed.bytesWritten)
      const upgrade = request.headers.upgrade !== undefined
      const answer = yield* Effect.tryPromise({
        try: () => exchange(dialed, request, targetOf(request, form, id, portText), port, upgrade),
        catch: () => new PortNotListening()
      }).pipe(Effect.onError(() => Effect.sync(() => dialed.destroy())))
      if (answer.kind === "upgrade") {
        const client = NodeHttpServerRequest.toIncomingMessage(request) as IncomingMessage
        const raw = client.socket as Socket
        const lines = [`HTTP/1.1 101 ${answer.response.statusMessage ?? "Switching Protocols"}`]
        for (let i = 0; i < answer.response.rawHeaders.length; i += 2) {
          lines.push(`${answer.response.rawHeaders[i]}: ${answer.response.rawHeaders[i + 1]}`)
        }
        raw.write(`${lines.join("\r\n")}\r\n\r\n`)
        if (answer.head.length > 0) raw.write(answer.head)
        raw.pipe(answer.socket).pipe(raw)
        yield* Effect.raceFirst(
          Effect.callback<void>((resume) => {
            raw.once("close", () => resume(Effect.void))
            answer.socket.once("close", () => resume(Effect.void))
          }),
          connection.ended
        ).pipe(
          Effect.ensuring(
            Effect.sync(() => {
              count()
              raw.destroy()
              answer.socket.destroy()
            })
          )
        )
        return HttpServerResponse.empty({ status: 101 })
      }
      const { headers, cookies } = responseHeaders(answer.response, form, id, portText)
      const length = answer.response.headers["content-length"]
      const body = Stream.fromAsyncIterable(
        answer.response as AsyncIterable<Uint8Array>,
        () => new PortNotListening()
      ).pipe(
        Stream.orDie,
        Stream.ensuring(
          Effect.sync(() => {
            count()
            dialed.destroy()
          })
        )
      )
      const response = HttpServerResponse.stream(body, {
        status: answer.response.statusCode ?? 502,
        headers,
        ...(length === undefined ? {} : { contentLength: Number(length) })
      })
      // Each of the program's cookies as a Set-Cookie header of its own (a header holds no newline).
      return cookies.length === 0
        ? response
        : HttpServerResponse.mergeCookies(response, Cookies.fromSetCookie(cookies))
    })

/** The gateway on the service's own origin (`/s/{id}/{port}/`). */
export const proxy = proxyFor("path")
