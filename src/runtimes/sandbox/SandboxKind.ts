import { Effect } from "effect"
import { defaultResources, SandboxConfig } from "./SandboxConfig.ts"
import { TerminalSize } from "../../kernel/Session.ts"
import { decodeInput } from "../../kernel/Validation.ts"
import { type Capability, type KindDescriptor, refusalOf } from "../../runtime/SessionKinds.ts"
import { Images } from "./Images.ts"

/** What a sandbox session lacks, said the way its clients need to hear it. */
const refusal = (capability: Capability) => {
  switch (capability) {
    case "cdp":
      return "This is a sandbox session: it has no CDP endpoint (use exec, the PTY or the gateway)."
    case "downloads":
      return "This is a sandbox session: fetch its files with GET .../download?path=."
    default:
      return refusalOf("sandbox", capability)
  }
}

/** An OCI container with a shell: commands, files, terminals and the gateway to its ports. */
export const descriptor = Effect.gen(function* () {
  const config = yield* SandboxConfig
  const images = yield* Images
  return {
    kind: "sandbox",
    sessionType: "sandbox",
    isolation: "browser",
    capabilities: new Set<Capability>(["exec", "pty", "gateway"]),
    refusal,
    accepts: {
      image: true,
      recording: false,
      logs: false,
      workspace: true,
      viewport: false,
      identity: false
    },
    resources: { defaults: defaultResources(config), maxima: config.maxima },
    defaultImage: config.image,
    imageExists: images.exists,
    decodeResize: decodeInput(TerminalSize),
    endpoints: (urls) => ({ cdp_url: null, control: urls.gatewayUrl, video: null })
  } satisfies KindDescriptor
})
