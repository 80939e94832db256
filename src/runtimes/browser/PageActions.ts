import * as Cdp from "../../platform/cdp/CdpClient.ts"
import { evaluateValue, load, NavigationFailed } from "../../platform/cdp/PageLoad.ts"
import { MAX_TEXT_CHARS, type PageAction, PageActionFailed } from "../../runtime/Drive.ts"

// The library has always exported the drive contract beside its implementation (`PageActions.PageAction`).
export { MAX_TEXT_CHARS, PageAction, PageActionFailed } from "../../runtime/Drive.ts"

/** The element's centre in the viewport, scrolled into view; `undefined` when none matches. */
const centreOf = async (client: Cdp.CdpClient, sessionId: string, selector: string) =>
  evaluateValue<{ x: number; y: number } | null>(
    client,
    sessionId,
    `(() => { const e = document.querySelector(${JSON.stringify(selector)}); if (!e) return null;
      e.scrollIntoView({ block: "center", inline: "center" }); const r = e.getBoundingClientRect();
      return { x: r.left + r.width / 2, y: r.top + r.height / 2 } })()`
  ).then((centre) => centre ?? undefined)

const notFound = (selector: string) =>
  new PageActionFailed({ reason: "element_not_found", detail: `No element matches ${selector}.` })

/** An invalid selector throws in the page: the caller's mistake, said as such. */
const checkSelector = async (client: Cdp.CdpClient, sessionId: string, selector: string) => {
  const valid = await evaluateValue<boolean>(
    client,
    sessionId,
    `(() => { try { document.querySelector(${JSON.stringify(selector)}); return true } catch { return false } })()`
  )
  if (valid !== true)
    throw new PageActionFailed({
      reason: "element_not_found",
      detail: `${selector} is not a valid selector.`
    })
}

/** Runs `action` on the page attached as `sessionId`; its answer is plain JSON. */
export const run = async (client: Cdp.CdpClient, sessionId: string, action: PageAction): Promise<unknown> => {
  switch (action._tag) {
    case "Navigate": {
      const loaded = await load(client, sessionId, action.url, action.waitMs).catch((error: unknown) => {
        throw error instanceof NavigationFailed
          ? new PageActionFailed({ reason: "navigation_failed", detail: error.message })
          : error
      })
      const title = (await evaluateValue<string>(client, sessionId, "document.title")) ?? ""
      return { url: loaded.url, status: loaded.status, title }
    }
    case "Text": {
      const page = await evaluateValue<{ url: string; title: string; text: string }>(
        client,
        sessionId,
        "({ url: location.href, title: document.title, text: document.body ? document.body.innerText : '' })"
      )
      const text = page?.text ?? ""
      return {
        url: page?.url ?? "",
        title: page?.title ?? "",
        text: text.slice(0, MAX_TEXT_CHARS),
        truncated: text.length > MAX_TEXT_CHARS
      }
    }
    case "Click": {
      await checkSelector(client, sessionId, action.selector)
      const centre = await centreOf(client, sessionId, action.selector)
      if (centre === undefined) throw notFound(action.selector)
      for (const type of ["mouseMoved", "mousePressed", "mouseReleased"]) {
        await client.send(
          "Input.dispatchMouseEvent",
          { type, x: centre.x, y: centre.y, button: type === "mouseMoved" ? "none" : "left", clickCount: 1 },
          sessionId
        )
      }
      return { clicked: action.selector, x: Math.round(centre.x), y: Math.round(centre.y) }
    }
    case "Type": {
      await checkSelector(client, sessionId, action.selector)
      const focused = await evaluateValue<boolean>(
        client,
        sessionId,
        `(() => { const e = document.querySelector(${JSON.stringify(action.selector)}); if (!e) return false;
          e.scrollIntoView({ block: "center" }); e.focus(); return true })()`
      )
      if (focused !== true) throw notFound(action.selector)
      // As a keyboard would: the page sees input events, not a changed property.
      await client.send("Input.insertText", { text: action.text }, sessionId)
      return { typed: action.selector, characters: [...action.text].length }
    }
    case "Evaluate": {
      const evaluated = await client.send<{
        result: { type: string; value?: unknown; description?: string }
        exceptionDetails?: { text?: string; exception?: { description?: string } }
      }>(
        "Runtime.evaluate",
        { expression: action.expression, returnByValue: true, awaitPromise: true, userGesture: true },
        sessionId
      )
      if (evaluated.exceptionDetails !== undefined) {
        const details = evaluated.exceptionDetails
        throw new PageActionFailed({
          reason: "evaluation_failed",
          detail: (details.exception?.description ?? details.text ?? "The expression threw.").slice(0, 2000)
        })
      }
      const { type, value } = evaluated.result
      return { type, value: value === undefined ? null : value }
    }
  }
}

/**
 * Runs `action` on the front page of the browser (of its context, for a
 * context session), opening a blank tab when the client closed them all.
 */
export const onFrontPage = async (
  client: Cdp.CdpClient,
  contextId: string | undefined,
  action: PageAction
): Promise<unknown> => {
  const pages = await Cdp.pageTargets(client, contextId)
  const targetId =
    pages[0]?.targetId ??
    (
      await client.send<{ targetId: string }>("Target.createTarget", {
        url: "about:blank",
        ...(contextId === undefined ? {} : { browserContextId: contextId })
      })
    ).targetId
  return Cdp.withPageSession(client, targetId, (sessionId) => run(client, sessionId, action))
}
