/**
 * A typed client of the service (`remote-browser-service/client`), derived
 * from the same HttpApi contract the server is built from (`Api`): every
 * route's payload, params, query and answer are typed, and every error the
 * route declares comes back as its own class (`SessionNotFound`,
 * `RateLimited`, ...) with its `status`, `code` and `message`.
 *
 * Two faces: `make` / `RemoteBrowser.layer` for Effect programs, and
 * `createClient` for everyone else (each call a Promise that rejects with the
 * route's error).
 */
import { Cause, Context, Effect, Exit, Layer } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest, type HttpClientResponse } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { Api } from "../http/Api.ts"

export interface ClientOptions {
  /** The service's address, e.g. `http://127.0.0.1:8080`. */
  readonly baseUrl: string
  /** An API key (`svc_live_...`) or an access token: sent as `Authorization: Bearer`. */
  readonly apiKey?: string | undefined
  /** The dashboard's `service_session` cookie value, for the routes that take only it (keys, top-ups). */
  readonly sessionCookie?: string | undefined
  /** The active account (`X-Service-Account`): an id, an exact name, or `personal`. */
  readonly account?: string | undefined
}

const withCredentials = (options: ClientOptions) => (request: HttpClientRequest.HttpClientRequest) => {
  let next = request
  if (options.apiKey !== undefined) next = HttpClientRequest.bearerToken(next, options.apiKey)
  if (options.sessionCookie !== undefined)
    next = HttpClientRequest.setHeader(next, "cookie", `service_session=${options.sessionCookie}`)
  if (options.account !== undefined)
    next = HttpClientRequest.setHeader(next, "x-service-account", options.account)
  return next
}

/** The typed client over the `HttpClient` in context (`FetchHttpClient.layer`, or the host's own). */
export const make = (options: ClientOptions) =>
  HttpApiClient.make(Api, {
    baseUrl: options.baseUrl,
    transformClient: HttpClient.mapRequest(withCredentials(options))
  })

/** The client's shape: one property per route group, one method per route. */
export type Client = Effect.Success<ReturnType<typeof make>>

/** The typed client as a service, for an Effect program. */
export class RemoteBrowser extends Context.Service<RemoteBrowser, Client>()("rbs/client/RemoteBrowser") {
  /** Over `fetch`. */
  static readonly layer = (options: ClientOptions) =>
    Layer.effect(RemoteBrowser, make(options)).pipe(Layer.provide(FetchHttpClient.layer))
}

/** What a method answers in its default mode (the decoded body, not the raw response). */
type Answer<F> = F extends (...args: any) => Effect.Effect<infer S, infer _E, infer _R>
  ? Exclude<
      S,
      HttpClientResponse.HttpClientResponse | readonly [unknown, HttpClientResponse.HttpClientResponse]
    >
  : never

/** A request whose headers are all optional (an `Idempotency-Key`) may leave `headers` out. */
type Relaxed<R> = R extends { readonly headers: infer H }
  ? {} extends H
    ? Omit<R, "headers"> & { readonly headers?: H }
    : R
  : R

type RelaxedArgs<A> = A extends readonly [infer R, ...infer Rest] ? [request: Relaxed<R>, ...rest: Rest] : A

/** The client for code without Effect: the same methods, each answering a Promise. */
export type PromiseClient = {
  readonly [Group in keyof Client]: {
    readonly [Route in keyof Client[Group]]: Client[Group][Route] extends (...args: infer A) => any
      ? (...args: RelaxedArgs<A>) => Promise<Answer<Client[Group][Route]>>
      : never
  }
}

/**
 * The client for code without Effect. Each method resolves with the route's
 * answer, or rejects with its error (an `Error` whose `status`, `code` and
 * `message` are the route's `{ error: { code, message } }`). `headers` may be
 * left out where every header of the route is optional (`Idempotency-Key`).
 *
 * ```ts
 * const rbs = createClient({ baseUrl: "http://127.0.0.1:8080", apiKey: process.env.KEY })
 * const session = await rbs.sessions.create({ payload: { ttl_seconds: 300 } })
 * await rbs.sessions.delete({ params: { id: session.id } })
 * ```
 */
export const createClient = (options: ClientOptions): PromiseClient => {
  const client = Effect.runSync(make(options).pipe(Effect.provide(FetchHttpClient.layer)))
  // Rejects with the route's declared error itself (its class), not a wrapper around it.
  const run = (effect: Effect.Effect<unknown, unknown>) =>
    Effect.runPromiseExit(effect).then((exit) =>
      Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause))
    )
  // A request without `headers` sends none (the Effect client wants `{}` where a route declares some).
  const withHeaders = (request: unknown) =>
    typeof request === "object" && request !== null && !("headers" in request)
      ? { ...request, headers: {} }
      : request
  const wrap =
    (f: (...args: Array<unknown>) => Effect.Effect<unknown, unknown>) =>
    (request?: unknown, ...rest: Array<unknown>) =>
      run(
        f(...(request === undefined ? [] : [withHeaders(request)]), ...rest) as Effect.Effect<
          unknown,
          unknown
        >
      )
  const out: Record<string, unknown> = {}
  for (const [name, member] of Object.entries(client as Record<string, unknown>)) {
    const group: Record<string, unknown> = {}
    for (const [route, f] of Object.entries(member as Record<string, unknown>)) group[route] = wrap(f as any)
    out[name] = group
  }
  return out as PromiseClient
}
