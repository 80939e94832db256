import { Effect } from "effect"
import * as Cdp from "../../platform/cdp/CdpClient.ts"
import type { EgressTap } from "../../runtime/EgressTap.ts"
import { check, report } from "../../runtime/SelfTestChecks.ts"

/**
 * `POST /v1/sessions/{id}/self-test` of a browser session: its browser
 * answers over CDP, its page renders, its egress proxy guards. A CDP failure
 * fails its check, said by its message (the checks, shared with the
 * sandbox's, run as promises side by side).
 */
export const selfTest =
  (runtime: {
    readonly control: Cdp.CdpClient
    readonly contextId: string | undefined
    readonly egress: EgressTap
  }) =>
  (sessionId: string) =>
    report(sessionId, "browser", [
      check("cdp", () =>
        Effect.runPromise(
          Effect.map(runtime.control.send<{ product?: string }>("Browser.getVersion"), (version) => ({
            ok: typeof version.product === "string",
            detail: `the browser answers over CDP (${version.product})`
          }))
        )
      ),
      check("render", () =>
        Effect.runPromise(
          Effect.map(Cdp.screenshot(runtime.control, runtime.contextId), (png) => ({
            ok: png[0] === 0x89 && png[1] === 0x50,
            detail: `its page rendered a ${png.length}-byte PNG`
          }))
        )
      ),
      check("egress", runtime.egress.probe)
    ])
