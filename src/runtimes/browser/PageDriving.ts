import { Effect } from "effect"
import * as Cdp from "../../platform/cdp/CdpClient.ts"
import type { PageAction } from "../../runtime/Drive.ts"
import * as PageActions from "./PageActions.ts"
import { newPointer } from "./ComputerActions.ts"

/**
 * A throw in the page code (an answer not shaped as the protocol says) fails
 * the request as the browser's failure: a defect would restart the session's
 * actor, and end the session with it.
 */
const failing = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, unknown> =>
  Effect.catchDefect(effect, Effect.fail)

/**
 * What a browser session's runtime offers of its pages, over the browser's
 * own control connection (of its context, for a context session): a
 * screenshot of the page in front, the service's page actions on it (a
 * `PageActionFailed` stays itself: the page's refusal is the caller's
 * answer), and the viewport's size. Its computer-use pointer stays where the
 * last call left it.
 */
export const pageCapabilities = (
  control: Cdp.CdpClient,
  contextId: string | undefined,
  frameHeight: number
) => {
  const pointer = newPointer()
  return {
    screenshot: failing(Cdp.screenshot(control, contextId)),
    drive: (action: PageAction) => failing(PageActions.onFrontPage(control, contextId, action, pointer)),
    resize: (width: number, height: number) =>
      failing(Cdp.resize(control, width, height, frameHeight, contextId))
  }
}
