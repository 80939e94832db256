import type { LogLevel, Redacted } from "effect"
import type { LimitsConfig } from "../../features/limits/LimitsConfig.ts"
import type { SandboxConfigInput } from "../../runtimes/sandbox/SandboxConfig.ts"

/**
 * What a host (or the environment, through `ConfigEnv`) gives the service;
 * `makeServiceConfig` turns it into the resolved `ServiceConfigShape`.
 * Everything is optional: unset means the documented default.
 */
export interface ServiceConfigInput {
  readonly host?: string | undefined
  readonly port?: number | undefined
  readonly publicUrl?: string | undefined
  readonly cdpBase?: string | undefined
  readonly streamBase?: string | undefined
  readonly dataDir?: string | undefined
  readonly databaseUrl?: string | undefined
  readonly chromePath?: string | undefined
  readonly browserPoolSize?: number | undefined
  readonly maxBrowsers?: number | undefined
  readonly maxContexts?: number | undefined
  readonly contextsPerBrowser?: number | undefined
  readonly contextBrowserSessions?: number | undefined
  readonly contextBrowserMemoryMb?: number | undefined
  readonly contextBrowserIdleSeconds?: number | undefined
  readonly contextStandby?: boolean | undefined
  readonly browserMemoryMb?: number | undefined
  readonly browserMaxTasks?: number | undefined
  readonly browserOpenFiles?: number | undefined
  readonly browserUidBase?: number | undefined
  readonly browserProfilesInMemory?: boolean | undefined
  readonly browserEnv?: Readonly<Record<string, string | undefined>> | undefined
  readonly nodeId?: string | undefined
  /** `host:port`, or `[v6]:port`. */
  readonly runnerAddress?: string | undefined
  readonly runnerListen?: string | undefined
  readonly nodeUrl?: string | undefined
  readonly secretsKey?: string | undefined
  readonly reaperIntervalMs?: number | undefined
  readonly jobLeaseSeconds?: number | undefined
  readonly drainSeconds?: number | undefined
  readonly logLevel?: LogLevel.LogLevel | undefined
  readonly limits?: { readonly [K in keyof LimitsConfig]?: LimitsConfig[K] | undefined } | undefined
  readonly redisUrl?: string | undefined
  readonly egressRegions?: string | undefined
  readonly egressDefaultRegion?: string | undefined
  readonly egressAllowCidrs?: string | undefined
  readonly webhookAllowCidrs?: string | undefined
  /** US dollars, up to six decimals. */
  readonly signupCreditUsd?: number | undefined
  readonly stripeSecretKey?: string | undefined
  readonly stripeWebhookSecret?: string | undefined
  readonly stripeApiUrl?: string | undefined
  /** An OIDC provider's name (of `oidcProviders`) kept for assistant sign-in: its callback links, never logs in. */
  readonly assistantIdp?: string | undefined
  readonly oidcProviders?:
    | ReadonlyArray<{
        readonly name: string
        readonly issuer: string
        readonly clientId: string
        readonly clientSecret: string | Redacted.Redacted<string>
      }>
    | undefined
  readonly auditRetentionDays?: number | undefined
  readonly previewTokenTtlSeconds?: number | undefined
  readonly dashboardDir?: string | undefined
  readonly blobStore?: string | undefined
  readonly s3Endpoint?: string | undefined
  readonly s3Region?: string | undefined
  readonly s3AccessKeyId?: string | undefined
  readonly s3SecretAccessKey?: string | undefined
  readonly recordingRetentionDays?: number | undefined
  readonly downloadRetentionHours?: number | undefined
  readonly ffmpegPath?: string | undefined
  /** `OTEL_EXPORTER_OTLP_ENDPOINT`: spans go to `<endpoint>/v1/traces` (OTLP over HTTP, JSON); unset, none. */
  readonly otelEndpoint?: string | undefined
  /** `OTEL_SERVICE_NAME` (default `remote-browser-service`). */
  readonly otelServiceName?: string | undefined
  /** `OTEL_EXPORTER_OTLP_HEADERS`: `name=value,name=value` sent with each export (an API key of the collector). */
  readonly otelHeaders?: string | Redacted.Redacted<string> | undefined
  readonly sandbox?: SandboxConfigInput | undefined
}
