import { Effect } from "effect"
import { ResizeRequest } from "../../kernel/Session.ts"
import { decodeInput } from "../../kernel/Validation.ts"
import { type Capability, type KindDescriptor, refusalOf } from "../../runtime/SessionKinds.ts"

/** What a browser session lacks, said the way its clients need to hear it. */
const refusal = (capability: Capability) => {
  switch (capability) {
    case "exec":
      return "This is a browser session: commands and files are for sandbox sessions only."
    case "pty":
      return "This is a browser session: a PTY is for sandbox sessions only (drive a browser over CDP)."
    case "gateway":
      return "This is a browser session: the gateway serves ports of sandbox sessions."
    default:
      return refusalOf("browser", capability)
  }
}

/** A Chromium of the session's own, driven over CDP, its screen watched and recorded. */
export const browserKind: KindDescriptor = {
  kind: "browser",
  sessionType: "browser",
  isolation: "browser",
  capabilities: new Set<Capability>(["cdp", "frames", "capture", "drive", "downloads"]),
  refusal,
  accepts: { image: false, recording: true, logs: true, workspace: true, viewport: true, identity: true },
  resources: null,
  defaultImage: null,
  imageExists: () => Effect.succeed(false),
  decodeResize: decodeInput(ResizeRequest),
  endpoints: (urls, status) => ({
    cdp_url: urls.cdpUrl,
    control: urls.cdpUrl,
    video: status === "creating" || status === "ready" ? urls.videoUrl : null
  })
}

export const descriptor = Effect.succeed(browserKind)
