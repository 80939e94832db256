import { Context, Layer } from "effect"
import { ServiceConfig } from "../../platform/config/Config.ts"

/** `SESSION_LOG_RETENTION_DAYS`: how long a session's log outlives the session. */
export class SessionLogsConfig extends Context.Service<
  SessionLogsConfig,
  { readonly retentionDays: number }
>()("rbs/logs/SessionLogsConfig") {
  static readonly layer = Layer.effect(
    SessionLogsConfig,
    ServiceConfig.useSync((config) => ({ retentionDays: config.sessionLogRetentionDays }))
  )
}
