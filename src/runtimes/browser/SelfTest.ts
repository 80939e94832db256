import * as Cdp from "../../platform/cdp/CdpClient.ts"
import { askProxy, check, report } from "../shared/SelfTestChecks.ts"

/**
 * `POST /v1/sessions/{id}/self-test` of a browser session: its browser
 * answers over CDP, its page renders, its egress proxy guards.
 */
export const selfTest =
  (runtime: {
    readonly control: Cdp.CdpClient
    readonly contextId: string | undefined
    readonly proxyPort: number
  }) =>
  (sessionId: string) =>
    report(sessionId, "browser", [
      check("cdp", async () => {
        const version = (await runtime.control.send("Browser.getVersion")) as { product?: string }
        return {
          ok: typeof version.product === "string",
          detail: `the browser answers over CDP (${version.product})`
        }
      }),
      check("render", async () => {
        const png = await Cdp.screenshot(runtime.control, runtime.contextId)
        const isPng = png[0] === 0x89 && png[1] === 0x50
        return { ok: isPng, detail: `its page rendered a ${png.length}-byte PNG` }
      }),
      check("egress", () => askProxy(runtime.proxyPort))
    ])
