import { Context, Layer } from "effect"
import { ConfigInputs } from "../../platform/config/Config.ts"
import type { LimitSettings } from "../../platform/config/ConfigInput.ts"

export const DEFAULT_LIMITS: LimitSettings = {
  sessionCreatesPerMinute: 20,
  screenshotsPerMinute: 60,
  computerCallsPerMinute: 300,
  previewTokensPerMinute: 10,
  webhookMutationsPerMinute: 60,
  execPerMinute: 600,
  fileTransfersPerMinute: 120,
  mcpRequestsPerMinute: 600,
  assistantMutationsPerMinute: 60,
  viewersPerSession: 10,
  connectionsPerSession: 32,
  connectionsPerAccount: 256,
  webhooksPerAccount: 20,
  keysPerAccount: 100,
  workspacesPerAccount: 100,
  jobsPerAccount: 10_000,
  imagesPerAccount: 20,
  mcpSessionsPerAccount: 100,
  concurrentSessions: 10,
  jobMutationsPerMinute: 60,
  workspaceMutationsPerMinute: 60,
  workspaceStorageMb: 10_240,
  concurrentJobs: 4,
  jobsPerNode: 4,
  loginAttemptsPerEmail: 10,
  loginAttemptsPerIp: 30,
  loginAttemptsPerAccount: 100,
  registrationsPerIp: 10,
  registrationsPerMinute: 60
}

/** The limits in force: the interface's defaults, as the configuration changes them (`LIMIT_*`). */
export class LimitsConfig extends Context.Service<LimitsConfig, LimitSettings>()("rbs/limits/LimitsConfig") {
  static readonly layer = Layer.effect(
    LimitsConfig,
    ConfigInputs.useSync((input) =>
      LimitsConfig.of({
        ...DEFAULT_LIMITS,
        ...Object.fromEntries(Object.entries(input.limits ?? {}).filter(([, value]) => value !== undefined))
      })
    )
  )
}
