import { Config, type LogLevel, Option, Schema } from "effect"
import { isScryptCost, type ServiceConfigInput } from "./ConfigInput.ts"

// The environment variables of the configuration table (docs/operations/configuration.md), read into
// a `ServiceConfigInput` (which `makeServiceConfig` turns into the config).

const LOG_LEVELS: ReadonlyArray<LogLevel.LogLevel> = [
  "All",
  "Fatal",
  "Error",
  "Warn",
  "Info",
  "Debug",
  "Trace",
  "None"
]
// `LOG_LEVEL=warn` and `LOG_LEVEL=Warn` both work.
const LOG_LEVEL_NAMES = LOG_LEVELS.flatMap((level) => [level, level.toLowerCase(), level.toUpperCase()])

const positiveInt = (name: string) =>
  Config.schema(Schema.FiniteFromString.check(Schema.isInt(), Schema.isGreaterThan(0)), name)

const nonNegativeInt = (name: string) =>
  Config.schema(Schema.FiniteFromString.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(0)), name)

const optional = <A>(config: Config.Config<A>) =>
  Config.option(config).pipe(Config.map(Option.getOrUndefined))

/** The environment variables of the configuration table (docs/operations/configuration.md). */
export const fromEnv: Config.Config<ServiceConfigInput> = Config.all({
  host: optional(Config.String("HOST")),
  port: optional(Config.Port("PORT")),
  publicUrl: optional(Config.String("PUBLIC_URL")),
  assistantIdp: optional(Config.String("ASSISTANT_IDP")),
  cdpBase: optional(Config.String("CDP_BASE")),
  gatewayDomain: optional(Config.String("GATEWAY_DOMAIN")),
  streamBase: optional(Config.String("STREAM_BASE")),
  dataDir: optional(Config.String("DATA_DIR")),
  databaseUrl: optional(Config.String("DATABASE_URL")),
  chromePath: optional(Config.String("CHROME_PATH")),
  browserPoolSize: optional(Config.Int("BROWSER_POOL_SIZE")),
  maxBrowsers: optional(nonNegativeInt("MAX_BROWSERS")),
  maxContexts: optional(Config.Int("MAX_CONTEXTS")),
  contextsPerBrowser: optional(positiveInt("CONTEXTS_PER_BROWSER")),
  contextBrowserSessions: optional(positiveInt("CONTEXT_BROWSER_SESSIONS")),
  contextBrowserMemoryMb: optional(positiveInt("CONTEXT_BROWSER_MEMORY_MB")),
  contextBrowserIdleSeconds: optional(positiveInt("CONTEXT_BROWSER_IDLE_SECONDS")),
  contextStandby: optional(Config.Boolean("CONTEXT_STANDBY")),
  contextWarmMax: optional(positiveInt("CONTEXT_WARM_MAX")),
  contextDemandSeconds: optional(positiveInt("CONTEXT_DEMAND_SECONDS")),
  browserMemoryMb: optional(positiveInt("BROWSER_MEMORY_MB")),
  browserMaxTasks: optional(positiveInt("BROWSER_MAX_TASKS")),
  browserOpenFiles: optional(positiveInt("BROWSER_OPEN_FILES")),
  browserUidBase: optional(positiveInt("BROWSER_UID_BASE")),
  browserProfilesInMemory: optional(Config.Boolean("BROWSER_PROFILES_IN_MEMORY")),
  inContainer: optional(Config.Boolean("RBS_CONTAINER")),
  browserEnv: Config.all({
    TZ: optional(Config.String("TZ")),
    LANG: optional(Config.String("LANG")),
    LC_ALL: optional(Config.String("LC_ALL")),
    LC_CTYPE: optional(Config.String("LC_CTYPE"))
  }),
  nodeId: optional(Config.String("NODE_ID")),
  runnerAddress: optional(Config.String("RUNNER_ADDRESS")),
  runnerListen: optional(Config.String("RUNNER_LISTEN")),
  runnerTlsCa: optional(Config.String("RUNNER_TLS_CA")),
  runnerTlsCert: optional(Config.String("RUNNER_TLS_CERT")),
  runnerTlsKey: optional(Config.String("RUNNER_TLS_KEY")),
  nodeUrl: optional(Config.String("NODE_URL")),
  secretsKey: optional(Config.String("SECRETS_KEY")),
  reaperIntervalMs: optional(Config.Int("REAPER_INTERVAL_MS")),
  jobLeaseSeconds: optional(positiveInt("JOB_LEASE_SECONDS")),
  workspaceMeasureSeconds: optional(positiveInt("WORKSPACE_MEASURE_SECONDS")),
  workspaceDiskMb: optional(nonNegativeInt("WORKSPACE_DISK_MB")),
  drainSeconds: optional(nonNegativeInt("DRAIN_SECONDS")),
  nodeHeartbeatMs: optional(
    Config.schema(
      Schema.FiniteFromString.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(100)),
      "NODE_HEARTBEAT_MS"
    )
  ),
  passwordScryptN: optional(
    Config.schema(
      Schema.FiniteFromString.check(
        Schema.makeFilter(isScryptCost, { expected: "a power of two from 1024 to 1048576" })
      ),
      "PASSWORD_SCRYPT_N"
    )
  ),
  passwordHashWorkers: optional(positiveInt("PASSWORD_HASH_WORKERS")),
  sessionIdleTimeoutSeconds: optional(positiveInt("SESSION_IDLE_TIMEOUT_SECONDS")),
  trustedProxies: optional(Config.String("TRUSTED_PROXIES")),
  trustedProxyHeader: optional(
    Config.schema(Schema.Literals(["x-forwarded-for", "forwarded"]), "TRUSTED_PROXY_HEADER")
  ),
  limits: Config.all({
    sessionCreatesPerMinute: optional(positiveInt("LIMIT_SESSION_CREATES_PER_MINUTE")),
    screenshotsPerMinute: optional(positiveInt("LIMIT_SCREENSHOTS_PER_MINUTE")),
    computerCallsPerMinute: optional(positiveInt("LIMIT_COMPUTER_CALLS_PER_MINUTE")),
    previewTokensPerMinute: optional(positiveInt("LIMIT_PREVIEW_TOKENS_PER_MINUTE")),
    webhookMutationsPerMinute: optional(positiveInt("LIMIT_WEBHOOK_MUTATIONS_PER_MINUTE")),
    execPerMinute: optional(positiveInt("LIMIT_EXEC_PER_MINUTE")),
    fileTransfersPerMinute: optional(positiveInt("LIMIT_FILE_TRANSFERS_PER_MINUTE")),
    mcpRequestsPerMinute: optional(positiveInt("LIMIT_MCP_REQUESTS_PER_MINUTE")),
    assistantMutationsPerMinute: optional(positiveInt("LIMIT_ASSISTANT_MUTATIONS_PER_MINUTE")),
    viewersPerSession: optional(positiveInt("LIMIT_VIEWERS_PER_SESSION")),
    connectionsPerSession: optional(positiveInt("LIMIT_CONNECTIONS_PER_SESSION")),
    connectionsPerAccount: optional(positiveInt("LIMIT_CONNECTIONS_PER_ACCOUNT")),
    webhooksPerAccount: optional(positiveInt("LIMIT_WEBHOOKS_PER_ACCOUNT")),
    keysPerAccount: optional(positiveInt("LIMIT_KEYS_PER_ACCOUNT")),
    workspacesPerAccount: optional(positiveInt("LIMIT_WORKSPACES_PER_ACCOUNT")),
    jobsPerAccount: optional(positiveInt("LIMIT_JOBS_PER_ACCOUNT")),
    imagesPerAccount: optional(positiveInt("LIMIT_IMAGES_PER_ACCOUNT")),
    mcpSessionsPerAccount: optional(positiveInt("LIMIT_MCP_SESSIONS_PER_ACCOUNT")),
    concurrentSessions: optional(positiveInt("LIMIT_CONCURRENT_SESSIONS")),
    jobMutationsPerMinute: optional(positiveInt("LIMIT_JOB_MUTATIONS_PER_MINUTE")),
    workspaceMutationsPerMinute: optional(positiveInt("LIMIT_WORKSPACE_MUTATIONS_PER_MINUTE")),
    workspaceStorageMb: optional(positiveInt("WORKSPACE_STORAGE_MB_PER_ACCOUNT")),
    concurrentJobs: optional(positiveInt("LIMIT_CONCURRENT_JOBS")),
    jobsPerNode: optional(positiveInt("LIMIT_JOBS_PER_NODE")),
    loginAttemptsPerEmail: optional(positiveInt("LIMIT_LOGIN_ATTEMPTS_PER_EMAIL")),
    loginAttemptsPerIp: optional(positiveInt("LIMIT_LOGIN_ATTEMPTS_PER_IP")),
    loginAttemptsPerAccount: optional(positiveInt("LIMIT_LOGIN_ATTEMPTS_PER_ACCOUNT")),
    registrationsPerIp: optional(positiveInt("LIMIT_REGISTRATIONS_PER_IP")),
    registrationsPerMinute: optional(positiveInt("LIMIT_REGISTRATIONS_PER_MINUTE"))
  }),
  auditRetentionDays: optional(positiveInt("AUDIT_RETENTION_DAYS")),
  jobRetentionDays: optional(positiveInt("JOB_RETENTION_DAYS")),
  previewTokenTtlSeconds: optional(positiveInt("PREVIEW_TOKEN_TTL_SECONDS")),
  blobStore: optional(Config.String("BLOB_STORE")),
  s3Endpoint: optional(Config.String("S3_ENDPOINT")),
  s3Region: optional(Config.String("S3_REGION")),
  s3AccessKeyId: optional(Config.String("S3_ACCESS_KEY_ID")),
  s3SecretAccessKey: optional(Config.String("S3_SECRET_ACCESS_KEY")),
  recordingRetentionDays: optional(positiveInt("RECORDING_RETENTION_DAYS")),
  sessionLogRetentionDays: optional(positiveInt("SESSION_LOG_RETENTION_DAYS")),
  downloadRetentionHours: optional(positiveInt("DOWNLOAD_RETENTION_HOURS")),
  imageMaxMb: optional(positiveInt("IMAGE_MAX_MB")),
  imageMaxUnpackedMb: optional(positiveInt("IMAGE_MAX_UNPACKED_MB")),
  ffmpegPath: optional(Config.String("FFMPEG_PATH")),
  otelEndpoint: optional(Config.String("OTEL_EXPORTER_OTLP_ENDPOINT")),
  otelServiceName: optional(Config.String("OTEL_SERVICE_NAME")),
  otelHeaders: optional(Config.String("OTEL_EXPORTER_OTLP_HEADERS")),
  sandbox: Config.all({
    maxSandboxes: optional(nonNegativeInt("MAX_SANDBOXES")),
    poolSize: optional(Config.Int("SANDBOX_POOL_SIZE")),
    memoryMb: optional(positiveInt("SANDBOX_MEMORY_MB")),
    maxTasks: optional(positiveInt("SANDBOX_MAX_TASKS")),
    openFiles: optional(positiveInt("SANDBOX_OPEN_FILES")),
    diskMb: optional(nonNegativeInt("SANDBOX_DISK_MB")),
    cpus: optional(Config.schema(Schema.FiniteFromString.check(Schema.isGreaterThan(0)), "SANDBOX_CPUS")),
    maxCpus: optional(
      Config.schema(Schema.FiniteFromString.check(Schema.isGreaterThan(0)), "SANDBOX_RESOURCES_MAX_CPUS")
    ),
    maxMemoryMb: optional(positiveInt("SANDBOX_RESOURCES_MAX_MEMORY_MB")),
    maxDiskMb: optional(positiveInt("SANDBOX_RESOURCES_MAX_DISK_MB")),
    maxPids: optional(positiveInt("SANDBOX_RESOURCES_MAX_PIDS")),
    image: optional(Config.String("SANDBOX_IMAGE")),
    imagesDir: optional(Config.String("SANDBOX_IMAGES_DIR")),
    uidBase: optional(positiveInt("SANDBOX_UID_BASE")),
    runcPath: optional(Config.String("RUNC_PATH"))
  }),
  redisUrl: optional(Config.String("REDIS_URL")),
  egressRegions: optional(Config.String("EGRESS_REGIONS")),
  egressDefaultRegion: optional(Config.String("EGRESS_DEFAULT_REGION")),
  egressAllowCidrs: optional(Config.String("EGRESS_ALLOW_CIDRS")),
  webhookAllowCidrs: optional(Config.String("WEBHOOK_ALLOW_CIDRS")),
  registryAllowCidrs: optional(Config.String("REGISTRY_ALLOW_CIDRS")),
  egressConnectionsPerSession: optional(positiveInt("EGRESS_CONNECTIONS_PER_SESSION")),
  blockAdsLists: optional(Config.String("BLOCK_ADS_LISTS")),
  stripeSecretKey: optional(Config.String("STRIPE_SECRET_KEY")),
  stripeWebhookSecret: optional(Config.String("STRIPE_WEBHOOK_SECRET")),
  stripeApiUrl: optional(Config.String("STRIPE_API_URL")),
  signupCreditUsd: optional(
    Config.schema(Schema.FiniteFromString.check(Schema.isGreaterThanOrEqualTo(0)), "SIGNUP_CREDIT_USD")
  ),
  logLevel: optional(
    Config.Literals(LOG_LEVEL_NAMES, "LOG_LEVEL").pipe(
      Config.map((name) => LOG_LEVELS.find((level) => level.toLowerCase() === name.toLowerCase())!)
    )
  )
})
