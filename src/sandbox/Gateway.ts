import { Clock, Effect, Option, Stream } from "effect"
import { Cookies, HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { NodeHttpServerRequest } from "@effect/platform-node"
import * as Http from "node:http"
import type { IncomingMessage } from "node:http"
import type { Socket } from "node:net"
import { RAW_ROUTES } from "../auth/Access.ts"
import { CurrentOrigin } from "../auth/AuthMiddleware.ts"
import { originOf } from "../auth/AuthMiddlewareLive.ts"
import { ServiceConfig } from "../Config.ts"
import { InvalidField } from "../domain/Errors.ts"
import { systemOwner } from "../domain/Owner.ts"
import { PortNotListening } from "../domain/SandboxErrors.ts"
import { errorResponse } from "../http/ErrorResponses.ts"
import { authorizeRaw, urlOrigin } from "../http/RawAuth.ts"
import { INTERNAL_PREFIX, type Here, SessionDoor } from "../sessions/SessionDoor.ts"
import { GatewayTokens } from "./GatewayTokens.ts"

/** The query parameter of a signed gateway link, and the cookie it becomes. */
export const LINK_PARAM = "rbs_token"
export const LINK_COOKIE = "rbs_gateway"

const ACCESS = RAW_ROUTES.find((route) => route.path === "/s/{id}/{port}/*")!.access

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

/** The path and query the program is asked for: what follows `/s/{id}/{port}`, without the link's token. */
const targetOf = (url: string, id: string, port: string) => {
  const parsed = new URL(url, "http://gateway")
  parsed.searchParams.delete(LINK_PARAM)
  // Reached through the door from another node, the path carries the twin route's prefix.
  const pathname = parsed.pathname.startsWith(`${INTERNAL_PREFIX}/`)
    ? parsed.pathname.slice(INTERNAL_PREFIX.length)
    : parsed.pathname
  const prefix = `/s/${id}/${port}`
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

/** The program's response headers as the client gets them: its cookies kept to its own path. */
const responseHeaders = (response: IncomingMessage, id: string, port: string) => {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(response.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name === "content-length" || name === "set-cookie")
      continue
    const text = Array.isArray(value) ? value.join(", ") : value
    // What the program says goes to the client only if it is a header at all.
    if (validHeader(name, text)) headers[name] = text
  }
  headers["content-security-policy"] = SANDBOX_CSP
  return {
    headers,
    cookies: (response.headers["set-cookie"] ?? []).map((cookie) => scopeCookie(cookie, id, port))
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

/** A cookie a program sets, confined to its own gateway path (and never one of the service's names). */
const scopeCookie = (cookie: string, id: string, port: string) => {
  const [pair = "", ...attributes] = cookie.split(";").map((part) => part.trim())
  const name = pair.split("=")[0] ?? ""
  const kept = attributes.filter((attribute) => !/^(path|domain)=/i.test(attribute))
  const safeName = name === "service_session" || name === LINK_COOKIE ? `app_${name}` : name
  return [`${safeName}${pair.slice(name.length)}`, `Path=/s/${id}/${port}/`, ...kept].join("; ")
}

/**
 * The gateway on the node that runs the sandbox: the request goes to the
 * port inside the sandbox over a connection its supervisor dials (the
 * sandbox's network has no other way in), HTTP answered as the program
 * answers (streamed), a WebSocket upgrade spliced both ways. Bytes both ways
 * count as the session's egress.
 */
const proxy: Here<"gateway", InvalidField | PortNotListening> = (request, connection, _owner, params) =>
  Effect.gen(function* () {
    const id = params.id ?? ""
    const portText = params.port ?? ""
    const port = portOf(portText)
    if (port === undefined) return yield* new InvalidField({ field: "port" })
    const sandbox = connection.runtime.sandbox
    const dialed = yield* Effect.tryPromise({
      try: () => sandbox.link.dial(port),
      catch: () => new PortNotListening()
    })
    const count = () => {
      sandbox.gateway.down += dialed.bytesWritten
      sandbox.gateway.up += dialed.bytesRead
    }
    const upgrade = request.headers.upgrade !== undefined
    const answer = yield* Effect.tryPromise({
      try: () => exchange(dialed, request, targetOf(request.url, id, portText), port, upgrade),
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
    const { headers, cookies } = responseHeaders(answer.response, id, portText)
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

/**
 * `{PUBLIC_URL}/s/{id}/{port}/...`: HTTP and WebSockets to a port a program
 * in the sandbox listens on (a dev server started with exec in the
 * background). Authenticated by key (`Authorization: Bearer` or
 * `?token=`), the dashboard cookie, or a signed link (`?rbs_token=`, from
 * `POST /v1/sessions/{id}/gateway-token`), which becomes a cookie scoped to
 * the session's gateway path so the page's own requests carry it. Reached
 * through the session door.
 */
export const layer = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const door = yield* SessionDoor
    const links = yield* GatewayTokens
    const config = yield* ServiceConfig
    const publicOrigin = urlOrigin(config.publicUrl)

    const handler = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const params = yield* HttpRouter.params
        const id = params.id ?? ""
        const now = new Date(yield* Clock.currentTimeMillis)
        const query = new URL(request.url, "http://gateway").searchParams
        const linkToken = query.get(LINK_PARAM) ?? request.cookies[LINK_COOKIE]
        const link = linkToken === undefined ? Option.none() : links.verify(linkToken, now)
        const owner =
          Option.isSome(link) && link.value.sessionId === id
            ? systemOwner(link.value.accountId)
            : yield* authorizeRaw(request, ACCESS, publicOrigin)
        const fromLink = query.get(LINK_PARAM)
        // A link opened in a browser: its token becomes the path's cookie and leaves the URL.
        if (
          fromLink !== null &&
          Option.isSome(link) &&
          request.headers.upgrade === undefined &&
          request.method === "GET"
        ) {
          const clean = new URL(request.url, "http://gateway")
          clean.searchParams.delete(LINK_PARAM)
          const maxAge = Math.max(1, Math.floor((link.value.expiresAt.getTime() - now.getTime()) / 1000))
          return HttpServerResponse.empty({
            status: 303,
            headers: {
              location: `${clean.pathname}${clean.search}`,
              "set-cookie": `${LINK_COOKIE}=${fromLink}; Path=/s/${id}/; Max-Age=${maxAge}; HttpOnly; SameSite=Lax`
            }
          })
        }
        const clean = new URL(request.url, "http://gateway")
        clean.searchParams.delete(LINK_PARAM)
        return yield* door.serve(
          request,
          { owner, id, kind: "gateway", params, path: `${clean.pathname}${clean.search}`, allHeaders: true },
          proxy
        )
      }).pipe(
        Effect.provideService(CurrentOrigin, originOf(request)),
        Effect.catch((error) => Effect.succeed(errorResponse(error)))
      )

    yield* router.add("*", "/s/:id/:port/*", (request) => {
      // `/s/{id}/{port}` has its slash added, so the program's relative links resolve under it.
      const url = new URL(request.url, "http://gateway")
      return /^\/s\/[^/]+\/[^/]+$/.test(url.pathname)
        ? Effect.succeed(
            HttpServerResponse.empty({ status: 308, headers: { location: `${url.pathname}/${url.search}` } })
          )
        : handler(request)
    })
    yield* router.add("*", `${INTERNAL_PREFIX}/s/:id/:port/*`, door.internal("gateway", proxy))
  })
)
