import type { LogLevel, Redacted } from "effect"

/** A scrypt cost (N) passwords may be hashed with: a power of two from 2^10 to 2^20. */
export const isScryptCost = (n: number) =>
  Number.isInteger(n) && n >= 1024 && n <= 1_048_576 && (n & (n - 1)) === 0

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
  /** `GATEWAY_DOMAIN`: sandbox ports at `<port>-<session id>.<domain>`, each its own origin. */
  readonly gatewayDomain?: string | undefined
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
  readonly contextWarmMax?: number | undefined
  readonly contextDemandSeconds?: number | undefined
  readonly browserMemoryMb?: number | undefined
  readonly browserMaxTasks?: number | undefined
  readonly browserOpenFiles?: number | undefined
  readonly browserUidBase?: number | undefined
  readonly browserProfilesInMemory?: boolean | undefined
  readonly browserEnv?: Readonly<Record<string, string | undefined>> | undefined
  /** `RBS_CONTAINER`: set by the service's container image; refusals then name the container's options. */
  readonly inContainer?: boolean | undefined
  readonly nodeId?: string | undefined
  /** `host:port`, or `[v6]:port`. */
  readonly runnerAddress?: string | undefined
  readonly runnerListen?: string | undefined
  /** `RUNNER_TLS_CA`: the PEM file of the CA that signs the nodes' runner certificates (with the two below). */
  readonly runnerTlsCa?: string | undefined
  /** `RUNNER_TLS_CERT`: this node's runner certificate (PEM), signed by `RUNNER_TLS_CA`. */
  readonly runnerTlsCert?: string | undefined
  /** `RUNNER_TLS_KEY`: that certificate's private key (PEM). */
  readonly runnerTlsKey?: string | undefined
  readonly nodeUrl?: string | undefined
  readonly secretsKey?: string | undefined
  readonly reaperIntervalMs?: number | undefined
  /** `WORKSPACE_DISK_MB`: each workspace's own file system (as root, with loop devices); 0 for none. */
  readonly workspaceDiskMb?: number | undefined
  /** `WORKSPACE_MEASURE_SECONDS`: how often a workspace in use is measured. */
  readonly workspaceMeasureSeconds?: number | undefined
  readonly jobLeaseSeconds?: number | undefined
  readonly drainSeconds?: number | undefined
  /** `NODE_HEARTBEAT_MS`: the beat of several nodes (`clusterTimings`). */
  readonly nodeHeartbeatMs?: number | undefined
  readonly logLevel?: LogLevel.LogLevel | undefined
  readonly limits?: { readonly [K in keyof LimitSettings]?: LimitSettings[K] | undefined } | undefined
  readonly redisUrl?: string | undefined
  readonly egressRegions?: string | undefined
  readonly egressDefaultRegion?: string | undefined
  readonly egressAllowCidrs?: string | undefined
  readonly webhookAllowCidrs?: string | undefined
  /** `REGISTRY_ALLOW_CIDRS`: the same exceptions for the registries `POST /v1/images` pulls from. */
  readonly registryAllowCidrs?: string | undefined
  /** `EGRESS_CONNECTIONS_PER_SESSION`: connections one session's egress proxy holds at once (more are closed). */
  readonly egressConnectionsPerSession?: number | undefined
  /** `BLOCK_ADS_LISTS`: the ad and tracker lists `block_ads` refuses the hosts of (paths, comma-separated). */
  readonly blockAdsLists?: string | undefined
  /** US dollars, up to six decimals. */
  readonly signupCreditUsd?: number | undefined
  /** `PASSWORD_SCRYPT_N`: the scrypt cost of password hashes made from now on (a power of two). */
  readonly passwordScryptN?: number | undefined
  /** `PASSWORD_HASH_WORKERS`: threads that hash and check passwords (default a quarter of the cores, at least 1). */
  readonly passwordHashWorkers?: number | undefined
  /** `SESSION_IDLE_TIMEOUT_SECONDS`: a session's `idle_timeout_seconds` when its create names none (10 to 86400). */
  readonly sessionIdleTimeoutSeconds?: number | undefined
  /** `TRUSTED_PROXIES`: CIDRs (or addresses) of reverse proxies whose `Forwarded` / `X-Forwarded-For` names the client. */
  readonly trustedProxies?: string | undefined
  /** `TRUSTED_PROXY_HEADER`: the header the trusted proxies keep, `x-forwarded-for` (default) or `forwarded`. */
  readonly trustedProxyHeader?: "x-forwarded-for" | "forwarded" | undefined
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
  /** `JOB_RETENTION_DAYS`: finished jobs (and their results) are deleted this long after they end. */
  readonly jobRetentionDays?: number | undefined
  readonly previewTokenTtlSeconds?: number | undefined
  readonly dashboardDir?: string | undefined
  readonly blobStore?: string | undefined
  readonly s3Endpoint?: string | undefined
  readonly s3Region?: string | undefined
  readonly s3AccessKeyId?: string | undefined
  readonly s3SecretAccessKey?: string | undefined
  readonly recordingRetentionDays?: number | undefined
  /** `SESSION_LOG_RETENTION_DAYS`: how long a session's log is kept after it ends (default 7). */
  readonly sessionLogRetentionDays?: number | undefined
  readonly downloadRetentionHours?: number | undefined
  /** `IMAGE_MAX_MB`: the largest image `POST /v1/images` pulls, its layers as stored (compressed). */
  readonly imageMaxMb?: number | undefined
  /** `IMAGE_MAX_UNPACKED_MB`: what a pulled image's layers may unpack to. */
  readonly imageMaxUnpackedMb?: number | undefined
  readonly ffmpegPath?: string | undefined
  /** `OTEL_EXPORTER_OTLP_ENDPOINT`: spans go to `<endpoint>/v1/traces` (OTLP over HTTP, JSON); unset, none. */
  readonly otelEndpoint?: string | undefined
  /** `OTEL_SERVICE_NAME` (default `remote-browser-service`). */
  readonly otelServiceName?: string | undefined
  /** `OTEL_EXPORTER_OTLP_HEADERS`: `name=value,name=value` sent with each export (an API key of the collector). */
  readonly otelHeaders?: string | Redacted.Redacted<string> | undefined
  readonly sandbox?: SandboxConfigInput | undefined
}

/** The interface's limits, each configurable (these are the defaults). */
export interface LimitSettings {
  /** `POST /v1/sessions` per account per minute. */
  readonly sessionCreatesPerMinute: number
  /** `POST /v1/sessions/{id}/screenshot` per session per minute. */
  readonly screenshotsPerMinute: number
  /** `POST /v1/sessions/{id}/computer` calls per session per minute. */
  readonly computerCallsPerMinute: number
  /** `POST /v1/sessions/{id}/preview-token` per session per minute. */
  readonly previewTokensPerMinute: number
  /** Webhook mutations (create, delete, rotate, replay, discard) per account per minute. */
  readonly webhookMutationsPerMinute: number
  /** Exec, stdin, kill and PTYs per principal per minute. */
  readonly execPerMinute: number
  /** Uploads and downloads per principal per minute. */
  readonly fileTransfersPerMinute: number
  /** Assistant creates, changes, pauses, resumes and credential writes per account per minute. */
  readonly assistantMutationsPerMinute: number
  /** `POST /v1/mcp` requests per principal per minute (the tools' own routes count theirs too). */
  readonly mcpRequestsPerMinute: number
  /** Live-view viewers of one session at once (`429 viewer_limit` beyond). */
  readonly viewersPerSession: number
  /** CDP, PTY, command, file and gateway connections to one session at once (`429 connection_limit` beyond). */
  readonly connectionsPerSession: number
  /** The same connections to one account's sessions on one node at once (`429 connection_limit` beyond). */
  readonly connectionsPerAccount: number
  /** Webhooks one account keeps (`409 resource_limit` for a create beyond). */
  readonly webhooksPerAccount: number
  /** API keys of one account that authenticate (not revoked, or in a rotation's grace): `409 resource_limit` beyond. */
  readonly keysPerAccount: number
  /** Workspaces one account keeps, assistants' homes included (`409 resource_limit` for a create beyond). */
  readonly workspacesPerAccount: number
  /** Jobs one account keeps, queued and running ones included, until their retention ends (`409 resource_limit` beyond). */
  readonly jobsPerAccount: number
  /** Images one account keeps, pulling and failed ones included (`409 resource_limit` for a create beyond). */
  readonly imagesPerAccount: number
  /** MCP sessions one node keeps of one account (past it, the account's least recently used is forgotten). */
  readonly mcpSessionsPerAccount: number
  /** Open (`creating` or `ready`) sessions per account. */
  readonly concurrentSessions: number
  /** Job creates, cancels and retries per account per minute. */
  readonly jobMutationsPerMinute: number
  /** Workspace creates, renames, template toggles, deletes, snapshots and restores per account per minute. */
  readonly workspaceMutationsPerMinute: number
  /** What an account's workspaces and their snapshots may hold, in MB (`WORKSPACE_STORAGE_MB_PER_ACCOUNT`). */
  readonly workspaceStorageMb: number
  /** Jobs of one account running at once, across the nodes (more wait `queued`). */
  readonly concurrentJobs: number
  /** Jobs one node runs at once (each holds a session while it runs). */
  readonly jobsPerNode: number
  /** `POST /auth/login` attempts at one email from one client address per minute. */
  readonly loginAttemptsPerEmail: number
  /** `POST /auth/login` attempts per client address per minute. */
  readonly loginAttemptsPerIp: number
  /** `POST /auth/login` attempts at one email from every address together per minute. */
  readonly loginAttemptsPerAccount: number
  /** `POST /auth/register` attempts per client address per minute. */
  readonly registrationsPerIp: number
  /** `POST /auth/register` attempts from everyone together per minute (per node, or the cluster with Redis). */
  readonly registrationsPerMinute: number
}

/** What a host (or the environment) says about sandboxes; everything optional. */
export interface SandboxConfigInput {
  /** `MAX_SANDBOXES`: sandboxes this node runs at most (0: none); unset derives it from memory and cores. */
  readonly maxSandboxes?: number | undefined
  /** `SANDBOX_POOL_SIZE`: warm sandboxes kept ready. */
  readonly poolSize?: number | undefined
  /** `SANDBOX_MEMORY_MB`, `SANDBOX_MAX_TASKS`, `SANDBOX_CPUS`: the limits of one sandbox. */
  readonly memoryMb?: number | undefined
  readonly maxTasks?: number | undefined
  readonly cpus?: number | undefined
  /** `SANDBOX_OPEN_FILES`: the files (sockets included) each process of a sandbox may hold open. */
  readonly openFiles?: number | undefined
  /** `SANDBOX_DISK_MB`: the size of one sandbox's writable layer (its own file system); 0 for none. */
  readonly diskMb?: number | undefined
  /**
   * `SANDBOX_RESOURCES_MAX_CPUS`, `SANDBOX_RESOURCES_MAX_MEMORY_MB`, `SANDBOX_RESOURCES_MAX_DISK_MB`,
   * `SANDBOX_RESOURCES_MAX_PIDS`: the most `resources` at create may ask for one sandbox.
   */
  readonly maxCpus?: number | undefined
  readonly maxMemoryMb?: number | undefined
  readonly maxDiskMb?: number | undefined
  readonly maxPids?: number | undefined
  /** `SANDBOX_IMAGE`: the image of a sandbox created without one. */
  readonly image?: string | undefined
  /** `SANDBOX_IMAGES_DIR`: the node's image store (an OCI layout and the unpacked images). */
  readonly imagesDir?: string | undefined
  /** `SANDBOX_UID_BASE`: the first host uid of the sandboxes' ranges (65,536 each). */
  readonly uidBase?: number | undefined
  /** `RUNC_PATH`. */
  readonly runcPath?: string | undefined
  /** Where `rbs-supervisor` and `rbs-idmap-mount` are (the set-up builds them into `native/build`). */
  readonly nativeDir?: string | undefined
}
