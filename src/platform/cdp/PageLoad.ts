import { Deferred, Effect, Schema } from "effect"
import type * as Cdp from "./CdpClient.ts"

/** Chromium could not load the page (DNS, the egress guard, TLS): the message says why. */
export class NavigationFailed extends Schema.TaggedError<NavigationFailed>()("NavigationFailed", {
  message: Schema.String
}) {}

/** What loading a URL answered: the final URL and the main document's HTTP status. */
export interface Loaded {
  readonly url: string
  readonly status: number | null
}

/**
 * Loads `url` in the attached page `sessionId`: waits for its load event, then
 * `waitMs`. A navigation Chromium refuses (DNS, the egress guard, TLS) fails
 * with `NavigationFailed`.
 */
export const load = (
  client: Cdp.CdpClient,
  sessionId: string,
  url: string,
  waitMs: number
): Effect.Effect<Loaded, NavigationFailed | Cdp.CdpError> =>
  Effect.gen(function* () {
    yield* client.send("Page.enable", {}, sessionId)
    yield* client.send("Network.enable", {}, sessionId)
    // The main document's answer, by loader: it may arrive before `Page.navigate` answers with its loader.
    const statuses = new Map<string, number>()
    const loaded = yield* Deferred.make<void>()
    const loaderId = yield* Effect.acquireUseRelease(
      Effect.sync(() => [
        client.on("Network.responseReceived", (params, from) => {
          if (from === sessionId && params.type === "Document" && !statuses.has(params.loaderId))
            statuses.set(params.loaderId, params.response.status)
        }),
        client.on("Page.loadEventFired", (_params, from) => {
          if (from === sessionId) Deferred.doneUnsafe(loaded, Effect.void)
        })
      ]),
      () =>
        Effect.gen(function* () {
          const navigated = yield* client.send<{ loaderId?: string; errorText?: string }>(
            "Page.navigate",
            { url },
            sessionId
          )
          if (navigated.errorText !== undefined && navigated.errorText !== "")
            return yield* new NavigationFailed({ message: `Loading ${url} failed: ${navigated.errorText}.` })
          // A same-document navigation (a fragment) has no loader and fires no load event.
          if (navigated.loaderId !== undefined) yield* Deferred.await(loaded)
          if (waitMs > 0) yield* Effect.sleep(waitMs)
          return navigated.loaderId
        }),
      (unsubscribe) => Effect.sync(() => unsubscribe.forEach((off) => off()))
    )
    const status = loaderId === undefined ? null : (statuses.get(loaderId) ?? null)
    return { url: (yield* evaluateValue<string>(client, sessionId, "location.href")) ?? url, status }
  })

/** The value of a side-effect-free `expression` in the page, returned by value. */
export const evaluateValue = <A>(client: Cdp.CdpClient, sessionId: string, expression: string) =>
  Effect.map(
    client.send<{ result: { value?: A } }>(
      "Runtime.evaluate",
      { expression, returnByValue: true },
      sessionId
    ),
    ({ result }) => result.value
  )
