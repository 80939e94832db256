import { Deferred, Effect } from "effect"
import { HttpEffect, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"

/** What a REST route answered: its status, headers and whole body. */
export interface RestAnswer {
  readonly status: number
  readonly headers: Headers
  readonly body: Uint8Array
}

/** The JSON of an answer's body; `null` for an empty or non-JSON body. */
export const jsonOf = (answer: RestAnswer): unknown => {
  if (answer.body.byteLength === 0) return null
  try {
    return JSON.parse(new TextDecoder().decode(answer.body))
  } catch {
    return null
  }
}

/** What a tool asks of a REST route. */
export interface RestRequest {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
  /** The path with its query, e.g. `/v1/sessions?limit=5`. */
  readonly path: string
  readonly json?: unknown
  readonly form?: FormData
}

/** The caller's headers an inner call carries: its credentials and account, never anything else. */
const CARRIED = ["authorization", "cookie", "x-service-account", "user-agent"]

/**
 * Calls one of the service's own REST routes in this process, as the caller of
 * `outer` (its credentials, account and address), through the same router,
 * middleware and handlers a request over the network takes: authentication,
 * scopes, rate limits, audit, billing, the node hop and the error bodies are
 * the route's own. The answer is read whole. Made once the router holds every
 * route (the first call), never per call.
 */
export const make = Effect.gen(function* () {
  const router = yield* HttpRouter.HttpRouter
  let app: ReturnType<typeof router.asHttpEffect> | undefined
  return (outer: HttpServerRequest.HttpServerRequest, request: RestRequest) =>
    Effect.gen(function* () {
      app ??= router.asHttpEffect()
      const headers = new Headers()
      for (const name of CARRIED) {
        const value = outer.headers[name]
        if (value !== undefined) headers.set(name, value)
      }
      let body: FormData | string | null = null
      if (request.form !== undefined) body = request.form
      else if (request.json !== undefined) {
        headers.set("content-type", "application/json")
        body = JSON.stringify(request.json)
      }
      const inner = HttpServerRequest.fromWeb(
        new Request(`http://service.internal${request.path}`, { method: request.method, headers, body })
      ).modify({ remoteAddress: outer.remoteAddress })
      const answered = yield* Deferred.make<HttpServerResponse.HttpServerResponse>()
      // A request of its own: its own scope and pre-response handlers (the route's headers), closed
      // once the body is read.
      yield* HttpEffect.toHandled(app, (_request, response) =>
        Deferred.succeed(answered, HttpEffect.scopeTransferToStream(response))
      ).pipe(Effect.provideService(HttpServerRequest.HttpServerRequest, inner))
      const response = yield* Deferred.await(answered)
      const context = yield* Effect.context<never>()
      const web = HttpServerResponse.toWeb(response, { context })
      const bytes = yield* Effect.promise(() => web.arrayBuffer())
      return { status: web.status, headers: web.headers, body: new Uint8Array(bytes) } satisfies RestAnswer
    })
})
