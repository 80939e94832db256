import { Effect, type Schema } from "effect"
import * as Cdp from "../../platform/cdp/CdpClient.ts"
import type { PageAction } from "../../runtime/Drive.ts"
import * as PageActions from "./PageActions.ts"

/**
 * What a browser session's runtime offers of its pages, over the browser's
 * own control connection (of its context, for a context session): a
 * screenshot of the page in front, and the service's page actions on it.
 */
export const pageCapabilities = (control: Cdp.CdpClient, contextId: string | undefined) => ({
  screenshot: Effect.tryPromise(() => Cdp.screenshot(control, contextId)),
  drive: (action: PageAction) =>
    Effect.tryPromise({
      try: () => PageActions.onFrontPage(control, contextId, action) as Promise<Schema.Json>,
      // A `PageActionFailed` stays itself: the page's refusal is the caller's answer.
      catch: (error) => error
    })
})
