import { Effect, type Schema } from "effect"
import * as Cdp from "../../platform/cdp/CdpClient.ts"
import { evaluateValue, load } from "../../platform/cdp/PageLoad.ts"
import { MAX_TEXT_CHARS, type PageAction, PageActionFailed } from "../../runtime/Drive.ts"
import { schemeOf } from "./CdpGuard.ts"
import * as ComputerActions from "./ComputerActions.ts"

// The library has always exported the drive contract beside its implementation (`PageActions.PageAction`).
export { MAX_TEXT_CHARS, PageAction, PageActionFailed } from "../../runtime/Drive.ts"

const notFound = (selector: string) =>
  new PageActionFailed({ reason: "element_not_found", detail: `No element matches ${selector}.` })

/** The element's centre in the viewport, scrolled into view; `element_not_found` when none matches. */
const centreOf = (client: Cdp.CdpClient, sessionId: string, selector: string) =>
  Effect.flatMap(
    evaluateValue<{ x: number; y: number } | null>(
      client,
      sessionId,
      `(() => { const e = document.querySelector(${JSON.stringify(selector)}); if (!e) return null;
      e.scrollIntoView({ block: "center", inline: "center" }); const r = e.getBoundingClientRect();
      return { x: r.left + r.width / 2, y: r.top + r.height / 2 } })()`
    ),
    (centre) => (centre == null ? Effect.fail(notFound(selector)) : Effect.succeed(centre))
  )

/** An invalid selector throws in the page: the caller's mistake, said as such. */
const checkSelector = (client: Cdp.CdpClient, sessionId: string, selector: string) =>
  Effect.flatMap(
    evaluateValue<boolean>(
      client,
      sessionId,
      `(() => { try { document.querySelector(${JSON.stringify(selector)}); return true } catch { return false } })()`
    ),
    (valid) =>
      valid === true
        ? Effect.void
        : Effect.fail(
            new PageActionFailed({
              reason: "element_not_found",
              detail: `${selector} is not a valid selector.`
            })
          )
  )

/** A URL the service's own Navigate loads: http or https, or about:blank (as `schemeOf` reads a URL). */
export const navigable = (url: string) => {
  const scheme = schemeOf(url)
  return scheme === "http:" || scheme === "https:" || url === "about:blank"
}

/**
 * Runs `action` on the page attached as `sessionId`; its answer is plain
 * JSON. The page's refusal is a `PageActionFailed`, the browser's a `CdpError`.
 * Computer-use input moves `pointer`, the session's (a new one at the
 * viewport's corner when not given).
 */
export const run = (
  client: Cdp.CdpClient,
  sessionId: string,
  action: PageAction,
  pointer: ComputerActions.Pointer = ComputerActions.newPointer()
): Effect.Effect<Schema.Json, PageActionFailed | Cdp.CdpError> => {
  switch (action._tag) {
    case "Computer":
      return ComputerActions.run(client, sessionId, action.actions, action.scale, pointer)
    case "Navigate":
      return Effect.gen(function* () {
        // Checked here, where it runs, whoever sent the message: the edge's check is not the only one.
        if (!navigable(action.url))
          return yield* new PageActionFailed({
            reason: "navigation_failed",
            detail: `Refused by the service: ${JSON.stringify(action.url.slice(0, 200))} is not a URL the service loads (only http, https or about:blank).`
          })
        const loaded = yield* load(client, sessionId, action.url, action.waitMs).pipe(
          Effect.catchTag("NavigationFailed", (error) =>
            Effect.fail(new PageActionFailed({ reason: "navigation_failed", detail: error.message }))
          )
        )
        const title = (yield* evaluateValue<string>(client, sessionId, "document.title")) ?? ""
        return { url: loaded.url, status: loaded.status, title }
      })
    case "Text":
      return Effect.map(
        evaluateValue<{ url: string; title: string; text: string }>(
          client,
          sessionId,
          "({ url: location.href, title: document.title, text: document.body ? document.body.innerText : '' })"
        ),
        (page) => {
          const text = page?.text ?? ""
          return {
            url: page?.url ?? "",
            title: page?.title ?? "",
            text: text.slice(0, MAX_TEXT_CHARS),
            truncated: text.length > MAX_TEXT_CHARS
          }
        }
      )
    case "Click":
      return Effect.gen(function* () {
        yield* checkSelector(client, sessionId, action.selector)
        const centre = yield* centreOf(client, sessionId, action.selector)
        for (const type of ["mouseMoved", "mousePressed", "mouseReleased"]) {
          yield* client.send(
            "Input.dispatchMouseEvent",
            {
              type,
              x: centre.x,
              y: centre.y,
              button: type === "mouseMoved" ? "none" : "left",
              clickCount: 1
            },
            sessionId
          )
        }
        return { clicked: action.selector, x: Math.round(centre.x), y: Math.round(centre.y) }
      })
    case "Type":
      return Effect.gen(function* () {
        yield* checkSelector(client, sessionId, action.selector)
        const focused = yield* evaluateValue<boolean>(
          client,
          sessionId,
          `(() => { const e = document.querySelector(${JSON.stringify(action.selector)}); if (!e) return false;
          e.scrollIntoView({ block: "center" }); e.focus(); return true })()`
        )
        if (focused !== true) return yield* notFound(action.selector)
        // As a keyboard would: the page sees input events, not a changed property.
        yield* client.send("Input.insertText", { text: action.text }, sessionId)
        return { typed: action.selector, characters: [...action.text].length }
      })
    case "Evaluate":
      return Effect.gen(function* () {
        const evaluated = yield* client.send<{
          result: { type: string; value?: Schema.Json; description?: string }
          exceptionDetails?: { text?: string; exception?: { description?: string } }
        }>(
          "Runtime.evaluate",
          { expression: action.expression, returnByValue: true, awaitPromise: true, userGesture: true },
          sessionId
        )
        if (evaluated.exceptionDetails !== undefined) {
          const details = evaluated.exceptionDetails
          return yield* new PageActionFailed({
            reason: "evaluation_failed",
            detail: (details.exception?.description ?? details.text ?? "The expression threw.").slice(0, 2000)
          })
        }
        const { type, value } = evaluated.result
        return { type, value: value === undefined ? null : value }
      })
  }
}

/**
 * Runs `action` on the front page of the browser (of its context, for a
 * context session), opening a blank tab when the client closed them all.
 */
export const onFrontPage = (
  client: Cdp.CdpClient,
  contextId: string | undefined,
  action: PageAction,
  pointer?: ComputerActions.Pointer
): Effect.Effect<Schema.Json, PageActionFailed | Cdp.CdpError> =>
  Effect.gen(function* () {
    const pages = yield* Cdp.pageTargets(client, contextId)
    const targetId =
      pages[0]?.targetId ??
      (yield* client.send<{ targetId: string }>("Target.createTarget", {
        url: "about:blank",
        ...(contextId === undefined ? {} : { browserContextId: contextId })
      })).targetId
    return yield* Cdp.withPageSession(client, targetId, (sessionId) =>
      run(client, sessionId, action, pointer)
    )
  })
