import { Context, Layer } from "effect"
import { ServiceConfig } from "../../platform/config/Config.ts"

/**
 * `REAPER_INTERVAL_MS` (how often sessions past their TTL are looked for), `PREVIEW_TOKEN_TTL_SECONDS`,
 * `SESSION_IDLE_TIMEOUT_SECONDS` (a session's `idle_timeout_seconds` when its create names none).
 */
export class SessionsConfig extends Context.Service<
  SessionsConfig,
  {
    readonly reaperIntervalMs: number
    readonly previewTokenTtlMs: number
    readonly idleTimeoutSeconds: number | undefined
  }
>()("rbs/sessions/SessionsConfig") {
  static readonly layer = Layer.effect(
    SessionsConfig,
    ServiceConfig.useSync((config) => ({
      reaperIntervalMs: config.reaperIntervalMs,
      previewTokenTtlMs: config.previewTokenTtlMs,
      idleTimeoutSeconds: config.sessionIdleTimeoutSeconds
    }))
  )
}
