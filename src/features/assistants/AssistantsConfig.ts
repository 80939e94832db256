import { Context, Layer } from "effect"
import { ServiceConfig } from "../../platform/config/Config.ts"

/** `ASSISTANT_IDP`: the login provider through which people link themselves to assistants. */
export class AssistantsConfig extends Context.Service<
  AssistantsConfig,
  { readonly assistantIdp: string | null }
>()("rbs/assistants/AssistantsConfig") {
  static readonly layer = Layer.effect(
    AssistantsConfig,
    ServiceConfig.useSync((config) => ({ assistantIdp: config.assistantIdp }))
  )
}
